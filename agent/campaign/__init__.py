"""Driving one campaign: start and resume (``start_resume``), reopening a run folder, the graph and its
nodes, the lanes (the GPU lane started early included), the runtime and checkpointed state, preflight,
the playbook planner, interrupts, the servers a run left, preloading and checkpoints, the hand-off review,
the hub check and the tuning caveats; the LLM planner and research lane are ``llm/``."""
