"""A0 `helpers/errors.format_error`: an exception as traceback text (what API 500s carry)."""

from __future__ import annotations

import traceback


def format_error(e: BaseException) -> str:
    return "".join(traceback.format_exception(type(e), e, e.__traceback__)).strip()
