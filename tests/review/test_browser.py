"""`curate review` as a person uses it: the command started as a user starts it, the page driven by keyboard in a real
headless Chromium (Debian's chromium and chromium-driver, through selenium; no browser is downloaded), labels given,
the page reloaded and the command restarted, and the labels file, `curate calibrate`'s figures and `curate adapt`'s
measure of the base classifier checked against the keys pressed. A document full of HTML and script renders as text
and runs nothing.

CURATE_REVIEW_SCREENSHOT=docs/review.png writes the page at 1280x800 there (the screenshot in docs/review.md).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from sklearn.metrics import f1_score, precision_recall_fscore_support

from curate.behaviors import BEHAVIOR_NAMES
from curate.classifiers import get_classifier
from curate.pipelines.jobs import SAMPLE_CORPUS
from curate.schema import ATTRIBUTE_SCHEMA, attribute_row

webdriver = pytest.importorskip("selenium.webdriver")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver (apt-get install -y chromium "
    "chromium-driver; .ci/run installs them)")]

HOSTILE = ("Let me check this. <script>document.title = 'pwned'; window.pwned = 1;</script> 2 + 2 = 4, verified. "
           "<img src=x onerror=\"window.pwned = 2\"> <b>not bold</b> &amp; Wait, that was wrong; try another way.")
# What the reader decides for each document, by its position in the order the page shows them: keys 1-4 toggle the
# behaviors present; the first evidence span of the hostile document is marked wrong (j, x).
DECISIONS = [{"verification"}, set(), {"verification", "backtracking"}, {"subgoal_setting"}, {"backtracking"},
             {"verification", "backward_chaining"}, set(), {"verification"}]


@pytest.fixture
def tagged(tmp_path):
    """Seven documents of the bundled sample corpus and the hostile one, tagged by the default classifier."""
    records = [json.loads(line) for line in (SAMPLE_CORPUS / "part1.jsonl").read_text().splitlines()[::20][:7]]
    records.append({"id": "hostile", "text": HOSTILE})
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in records))
    classifier = get_classifier("cues")
    labels = classifier.classify([r["text"] for r in records])
    rows = [attribute_row(r["id"], len(r["text"]), label, classifier.name, None, classifier.prompt_version,
                          "corpus.jsonl") for r, label in zip(records, labels)]
    tags = tmp_path / "tags" / classifier.name
    tags.mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=ATTRIBUTE_SCHEMA), tags / "00000.parquet")
    return corpus, tags, {r["id"]: row for r, row in zip(records, rows)}


class ReviewCommand:
    """`curate review` in its own process, as a user runs it; the address is the line it prints on stdout."""

    def __init__(self, corpus: Path, tags: Path, folder: Path):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "curate.cli", "review", "--tags", str(tags), "--input", str(corpus), "--sample",
             "8", "--port", "0", "-o", str(folder)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
        line = self.process.stdout.readline()
        if not line.startswith("Review at "):
            self.process.kill()
            raise AssertionError(f"curate review printed {line!r}; stderr: {self.process.stderr.read()}")
        self.url = line.split()[-1]

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture
def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'chromium-profile'}", "--window-size=1280,800"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=webdriver.ChromeService(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def press(driver, *keys: str) -> None:
    for key in keys:
        ActionChains(driver).send_keys(key).perform()


def wait_for_text(driver, selector: str, text: str) -> None:
    shown = expected_conditions.text_to_be_present_in_element((By.CSS_SELECTOR, selector), text)
    WebDriverWait(driver, 15).until(shown)


def shown_id(driver) -> str:
    WebDriverWait(driver, 15).until(lambda d: d.find_element(By.ID, "doc-id").text)
    return driver.find_element(By.ID, "doc-id").text


def check_hostile_text_is_text(driver) -> None:
    text = driver.find_element(By.ID, "text")
    assert "<script>document.title = 'pwned'" in text.text and '<img src=x onerror="window.pwned = 2">' in text.text
    assert not text.find_elements(By.CSS_SELECTOR, "script, img, b")
    assert driver.title == "curate review" and driver.execute_script("return window.pwned") is None
    assert driver.find_elements(By.CSS_SELECTOR, "#text mark.hl")  # its evidence is highlighted, as text too


def label_documents(driver, decisions: list[set[str]], first: int) -> dict[str, tuple[set[str], bool]]:
    """Labels the next documents by keyboard; returns id -> (behaviors marked present, first span marked wrong)."""
    given = {}
    for offset, present in enumerate(decisions):  # `first`: how many the reader has labeled before
        doc_id = shown_id(driver)
        if doc_id == "hostile":
            check_hostile_text_is_text(driver)
        press(driver, *[str(BEHAVIOR_NAMES.index(b) + 1) for b in sorted(present)])
        mark_span = doc_id == "hostile"
        if mark_span:
            press(driver, "j", "x")
            assert driver.find_element(By.CSS_SELECTOR, "#spans li").get_attribute("class") == "wrong focused"
        pressed = {b.get_attribute("data-behavior") for b in driver.find_elements(By.CSS_SELECTOR, "#behaviors button")
                   if b.get_attribute("aria-pressed") == "true"}
        assert pressed == present
        press(driver, "\n")
        wait_for_text(driver, "#progress", f"{first + offset + 1} of 8 read")
        if first + offset + 1 < 8:  # the next document is in place before its keys are pressed
            WebDriverWait(driver, 15).until(lambda d: d.find_element(By.ID, "doc-id").text not in (doc_id, ""))
        given[doc_id] = (present, mark_span)
    return given


def test_a_reader_labels_by_keyboard_reloads_resumes_and_calibrate_reads_those_labels(tagged, tmp_path, browser):
    corpus, tags, rows = tagged
    folder = tmp_path / "review"
    command = ReviewCommand(corpus, tags, folder)
    try:
        browser.get(command.url)
        wait_for_text(browser, "#progress", "0 of 8 read")
        given = label_documents(browser, DECISIONS[:3], first=0)
        if screenshot := os.environ.get("CURATE_REVIEW_SCREENSHOT"):
            browser.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",  # the page itself at 1280x800
                                    {"width": 1280, "height": 800, "deviceScaleFactor": 1, "mobile": False})
            browser.save_screenshot(screenshot)
            browser.execute_cdp_cmd("Emulation.clearDeviceMetricsOverride", {})
        browser.refresh()  # a closed or reloaded tab loses nothing and goes on at the first unread document
        wait_for_text(browser, "#progress", "3 of 8 read")
        assert shown_id(browser) not in given
        given |= label_documents(browser, DECISIONS[3:6], first=3)
    finally:
        command.stop()
    command = ReviewCommand(corpus, tags, folder)  # reopening the folder resumes
    try:
        browser.get(command.url)
        wait_for_text(browser, "#progress", "6 of 8 read")
        given |= label_documents(browser, DECISIONS[6:], first=6)
        assert browser.find_element(By.ID, "done").is_displayed()
    finally:
        command.stop()
    assert set(given) == set(rows) and "hostile" in given

    lines = [json.loads(line) for line in (folder / "labels.jsonl").read_text().splitlines()]
    assert [line["id"] for line in lines] == list(given)  # one line per document, in the order read
    for line in lines:
        present, span_marked = given[line["id"]]
        assert line["labels"] == {b: int(b in present) for b in BEHAVIOR_NAMES}
        assert line["seconds"] >= 0 and line["stratum_size"] >= 1
        first_span = rows[line["id"]]["evidence"][:1]  # the one the reader marked, on the one document marked
        assert line["spans"] == [{"behavior": s["behavior"], "start": s["start"], "end": s["end"], "verdict": "wrong"}
                                 for s in first_span if span_marked]
    assert sum(span_marked for _, span_marked in given.values()) == 1

    result = subprocess.run([sys.executable, "-m", "curate.cli", "calibrate", "--labels", str(folder / "labels.jsonl"),
                             "--tags", str(tags), "-o", str(tmp_path / "calibration")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "calibration" / "calibration.json").read_text())
    ids = list(given)
    for k, behavior in enumerate(BEHAVIOR_NAMES):
        gold = np.array([int(behavior in given[i][0]) for i in ids])
        predicted = np.array([int(rows[i][behavior] > 0) for i in ids])
        figures = report["behaviors"][behavior]
        # Every document of the corpus was drawn, so each stands for itself: the plain figures are the corpus's.
        expected = precision_recall_fscore_support(gold, predicted, average="binary", zero_division=np.nan)[:2]
        for name, value in zip(("precision", "recall"), expected):
            assert figures[name]["value"] == (None if np.isnan(value) else pytest.approx(value))
        assert figures["n_labeled"] == 8

    # adapt reads the texts from the review's sample beside the labels, and measures the base on the same labels.
    result = subprocess.run([sys.executable, "-m", "curate.cli", "adapt", "--labels", str(folder / "labels.jsonl"),
                             "--refit", "thresholds", "--folds", "2", "--models", str(tmp_path / "models")],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    adapted = json.loads((tmp_path / "models" / "adapted_ngram_v1" / "model.json").read_text())["adapted"]
    for behavior in BEHAVIOR_NAMES:
        gold = [int(behavior in given[i][0]) for i in ids]
        predicted = [int(rows[i][behavior] > 0) for i in ids]
        base_f1 = adapted["cross_validation"][behavior]["base_f1"]
        assert base_f1 == pytest.approx(f1_score(gold, predicted, zero_division=0.0))
