"""Constraints on speculative settings read from SGLang's argument hooks: the rules (``extract``) and
which architectures and algorithms each piece of hook code applies to (``context``)."""
