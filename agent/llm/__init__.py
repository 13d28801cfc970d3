"""LLM mode: the client (the only openai importer), the tool registry and dispatch, the planner's graph
nodes and the research lane, their recorded conversations, the budget, the flag guard and prompts."""
