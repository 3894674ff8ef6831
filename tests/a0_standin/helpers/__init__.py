"""A0 `helpers` package (stand-in).

A0 ships `helpers/` as a namespace package; the stand-in makes it a regular package so that a
plugin repository's own `helpers/` folder (on sys.path when pytest runs from the repo) can never
shadow it.
"""
