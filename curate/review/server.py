"""The review page: a small FastAPI app over a review folder, served on 127.0.0.1 only.

The page is a template with no document in it; its script (static/review.js) asks for one document at a time as
JSON and puts every piece of text into the page with `textContent`, so a document's HTML or <script> is shown, never
run. The Content-Security-Policy allows scripts from this server's own files only, so an inline script could not
run even if text were ever put into the page as HTML. The document is cut into segments here, in Python, where the
spans' character offsets mean what the classifier meant (JavaScript counts UTF-16 units, not characters).
"""

from __future__ import annotations

import datetime
import socket
from pathlib import Path

import uvicorn
from fastapi import FastAPI, HTTPException
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, FileSystemLoader, select_autoescape
from pydantic import BaseModel

from curate.behaviors import BEHAVIOR_NAMES
from curate.review.labels import LabelsFile
from curate.review.sample import LABELS_FILE, read_sample

HERE = Path(__file__).resolve().parent
HOST = "127.0.0.1"  # never another interface: the page shows the user's corpus and writes their labels
CONTENT_SECURITY_POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
                           "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


class SpanVerdict(BaseModel):
    behavior: str
    start: int
    end: int


class LabelIn(BaseModel):
    position: int
    labels: dict[str, int]
    wrong_spans: list[SpanVerdict] = []
    seconds: float | None = None


def segments(text: str, spans: list[dict], max_chars: int) -> tuple[list[dict], bool]:
    """The shown text cut at every span boundary: [{text, spans: [indices of the spans covering it]}], and whether the
    text was cut at `max_chars`."""
    shown = text[:max_chars]
    cuts = sorted({0, len(shown), *(min(max(s[k], 0), len(shown)) for s in spans for k in ("start", "end"))})
    out = []
    for start, end in zip(cuts, cuts[1:]):
        if end > start:
            covering = [i for i, s in enumerate(spans) if s["start"] <= start and end <= s["end"]]
            out.append({"text": shown[start:end], "spans": covering})
    return out, len(text) > max_chars


def make_app(folder: Path, max_chars: int = 20000) -> FastAPI:
    sample = read_sample(folder)
    positions = {doc["id"]: i for i, doc in enumerate(sample)}
    labels = LabelsFile(folder / LABELS_FILE)
    template = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))
    page = template.get_template("review.html")
    app = FastAPI(title="curate review", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    @app.middleware("http")
    async def secure_headers(request, call_next):
        response = await call_next(request)
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Cache-Control"] = "no-store"
        return response

    def state() -> dict:
        read = sum(doc["id"] in labels.labeled for doc in sample)
        unread = next((i for i, doc in enumerate(sample) if doc["id"] not in labels.labeled), None)
        return {"total": len(sample), "read": read, "next": unread, "behaviors": list(BEHAVIOR_NAMES),
                "labels_file": str(labels.path)}

    @app.get("/", response_class=HTMLResponse)
    def index() -> str:
        return page.render(folder=str(folder), behaviors=BEHAVIOR_NAMES, total=len(sample))

    @app.get("/api/state")
    def get_state() -> dict:
        return state()

    @app.get("/api/doc/{position}")
    def document(position: int) -> dict:
        if not 0 <= position < len(sample):
            raise HTTPException(404, f"no document at position {position} (the sample holds {len(sample)})")
        doc = sample[position]
        parts, cut = segments(doc["text"], doc["spans"], max_chars)
        given = labels.labeled.get(doc["id"])
        return {"position": position, "id": doc["id"], "segments": parts, "cut": cut, "chars": len(doc["text"]),
                "spans": [{**s, "excerpt": doc["text"][s["start"]:s["end"]][:300]} for s in doc["spans"]],
                "predicted": doc["predicted"], "scores": doc["scores"], "stratum": doc["stratum"],
                "given": None if given is None else {"labels": given["labels"], "wrong_spans": given.get("spans", [])}}

    @app.post("/api/label")
    def label(answer: LabelIn) -> dict:
        if not 0 <= answer.position < len(sample):
            raise HTTPException(404, f"no document at position {answer.position}")
        doc = sample[answer.position]
        unknown = set(answer.labels) - set(BEHAVIOR_NAMES)
        if unknown or any(v not in (0, 1) for v in answer.labels.values()):
            raise HTTPException(422, f"labels are 0/1 for {', '.join(BEHAVIOR_NAMES)}")
        known_spans = {(s["behavior"], s["start"], s["end"]) for s in doc["spans"]}
        wrong = [s.model_dump() for s in answer.wrong_spans]
        if any((s["behavior"], s["start"], s["end"]) not in known_spans for s in wrong):
            raise HTTPException(422, "a span marked wrong is not one of this document's spans")
        labels.append({"id": doc["id"], "labels": {b: answer.labels.get(b, 0) for b in BEHAVIOR_NAMES},
                       "stratum": doc["stratum"], "stratum_size": doc["stratum_size"],
                       "spans": [{**s, "verdict": "wrong"} for s in wrong], "seconds": answer.seconds,
                       "at": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")})
        return state()

    app.state.review_state = state
    return app


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1 (port 0: any free port), bound before the server starts so that the address
    printed is the one served."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listener.bind((HOST, port))
    except OSError as error:
        listener.close()
        raise OSError(f"cannot listen on {HOST}:{port} ({error.strerror}); give another --port, or 0 for "
                      "any") from error
    listener.listen(64)
    return listener


def serve(app: FastAPI, listener: socket.socket) -> None:
    """Serves until interrupted (Ctrl-C)."""
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    server.run(sockets=[listener])
