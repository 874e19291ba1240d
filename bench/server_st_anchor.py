"""bench/server_st_anchor.py MODEL_DIR PORT — the fallback anchor of bench/server_bench.py: the model
through sentence-transformers behind uvicorn (FastAPI), OpenAI's embeddings route, CPU, offline.
Requests are embedded one request at a time (sentence-transformers' own batching of the request's
texts, batch size 32), as a plain Python service does."""
import sys

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel
from sentence_transformers import SentenceTransformer
from starlette.concurrency import run_in_threadpool

model_dir, port = sys.argv[1], int(sys.argv[2])
model = SentenceTransformer(model_dir, device="cpu")
app = FastAPI()


class Req(BaseModel):
    input: list[str] | str
    model: str | None = None


@app.get("/health")
def health():
    return {"status": "ok"}


@app.post("/v1/embeddings")
async def embeddings(r: Req):
    texts = [r.input] if isinstance(r.input, str) else r.input
    vecs = await run_in_threadpool(model.encode, texts, batch_size=32)
    return {"object": "list", "model": r.model or "all-MiniLM-L6-v2",
            "data": [{"object": "embedding", "index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)],
            "usage": {"prompt_tokens": 0, "total_tokens": 0}}


uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")
