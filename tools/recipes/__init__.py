"""Launch-recipe extraction: server configurations read statically from SGLang's tests and fixtures.

Nothing is imported or run: files are parsed with ``ast`` and the expressions that build
``other_args``/``env``/the model id are evaluated by a small static evaluator that follows
module constants, imports, class attributes (inherited across files), list concatenation,
``+=``, f-strings and helper methods. Files that do not parse are skipped with a warning.
"""
from __future__ import annotations

from tools.recipes.extract import EXTRACT_RECIPES, ExtractRecipesArgs, RecipesResult, extract_recipes
from tools.recipes.model import Recipe

__all__ = ["EXTRACT_RECIPES", "ExtractRecipesArgs", "RecipesResult", "extract_recipes", "Recipe"]
