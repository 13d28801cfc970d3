"""LLM mode: the client (the only openai importer), the one tool loop (``loop``) with its recorded
conversations, budget, tool registry and dispatch; the planner's contract and graph nodes, the research
lane, the flag guard and prompts."""
