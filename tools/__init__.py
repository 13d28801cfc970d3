"""Capabilities of dsv4-agent, each usable without LangGraph or openai.

A tool is a pydantic ``Args`` model (its docstring is the tool description, every field has a
description) plus a plain function that takes it and returns a pydantic result. See
``tools/base.py``.
"""
