"""The one door to huggingface_hub: every call the package makes into it goes through here.

huggingface_hub is imported inside these functions, never at the top: most commands never touch the Hub, and
its import costs more than the rest of the CLI's start-up (tests/test_imports.py). Keeping every use here means
a new huggingface_hub release is checked against one module (tests/test_package_shape.py holds that rule).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

PACKAGE = "huggingface_hub"  # its import name, and its logger's
PROGRESS_ENV = "HF_HUB_DISABLE_PROGRESS_BARS"


def api(endpoint: str | None, token: str | None) -> Any:
    """An HfApi for `endpoint` (None: huggingface_hub's own) with `token`."""
    from huggingface_hub import HfApi

    return HfApi(endpoint=endpoint, token=token)


def default_endpoint() -> str | None:
    """The endpoint huggingface_hub settled on at its import (HF_ENDPOINT then, else huggingface.co)."""
    from huggingface_hub import constants

    return constants.ENDPOINT


def session() -> Any:
    """huggingface_hub's HTTP session (its proxies, headers and retries)."""
    from huggingface_hub.utils import get_session

    return get_session()


def errors() -> ModuleType:
    """huggingface_hub.errors, whose classes tell a missing revision from a gated repo or a cache miss."""
    from huggingface_hub import errors as hf_errors

    return hf_errors


def snapshot_download(repo_id: str, **kwargs: Any) -> str:
    from huggingface_hub import snapshot_download as download

    return download(repo_id, **kwargs)


def file_download(repo_id: str, filename: str, **kwargs: Any) -> str:
    from huggingface_hub import hf_hub_download

    return hf_hub_download(repo_id, filename, **kwargs)


def get_file(repo_id: str, name: str, *, revision: str, endpoint: str | None, token: str | None,
             byte_range: tuple[int, int] | None = None) -> Any:
    """The HTTP response for file `name` of a repo at `revision` (bytes [start, end] of it with `byte_range`),
    raised for its status as huggingface_hub raises it."""
    from huggingface_hub import hf_hub_url
    from huggingface_hub.utils import build_hf_headers, get_session, hf_raise_for_status

    url = hf_hub_url(repo_id, name, revision=revision, endpoint=endpoint)
    headers = build_hf_headers(token=token)
    if byte_range is not None:
        headers["Range"] = f"bytes={byte_range[0]}-{byte_range[1]}"
    response = get_session().get(url, headers=headers, follow_redirects=True, timeout=30)
    hf_raise_for_status(response)
    return response


def card_text(front_matter: dict[str, Any], body: str) -> str:
    """A model card: `front_matter` as ModelCardData's own YAML, the whole text parsed back as the Hub will."""
    from huggingface_hub import ModelCard, ModelCardData

    data = ModelCardData(**front_matter)
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n{body}"))


def card_license(readme: Path) -> Any:
    """The license a model card's front matter declares (huggingface_hub's reading of it)."""
    from huggingface_hub import ModelCard

    return ModelCard.load(readme, ignore_metadata_errors=True).data.license


def upload_operation(path_in_repo: str, content: Path | bytes) -> Any:
    """A CommitOperationAdd: it hashes a file here, once, and the upload reuses that hash."""
    from huggingface_hub import CommitOperationAdd

    return CommitOperationAdd(path_in_repo=path_in_repo,
                              path_or_fileobj=str(content) if isinstance(content, Path) else content)


def stored_token() -> str | None:
    """HF_TOKEN, else the `hf auth login` store."""
    from huggingface_hub import get_token

    return get_token()


@contextmanager
def quiet() -> Iterator[None]:
    """huggingface_hub logs every retry as a warning; our one error line says what happened."""
    import logging  # (only on the way to the Hub: --help imports no logging)

    logger = logging.getLogger(PACKAGE)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


@contextmanager
def no_progress_bars() -> Iterator[None]:
    """huggingface_hub's own download/upload bars off for the duration."""
    if PACKAGE not in sys.modules:  # read at its import: no need to import it here just to say no
        saved = os.environ.get(PROGRESS_ENV)
        os.environ[PROGRESS_ENV] = "1"
        try:
            yield
        finally:
            if saved is None:
                os.environ.pop(PROGRESS_ENV, None)
            else:
                os.environ[PROGRESS_ENV] = saved
        return
    from huggingface_hub.utils import are_progress_bars_disabled, disable_progress_bars, enable_progress_bars

    was_disabled = are_progress_bars_disabled()
    if not was_disabled:
        disable_progress_bars()
    try:
        yield
    finally:
        if not was_disabled:
            enable_progress_bars()
