#!/usr/bin/python3
"""OCR through packrat: PaddleOCR's detector, direction classifier and
recognizer, each served by packrat, chained by this client.

usage: ocr.py [--url http://127.0.0.1:8000] (--repository DIR | --dict FILE)
              (--text "LINE\\nLINE..." | --image FILE) [--save FILE.png] [--json]

The repository comes from make_repo.py (models ocr_det, ocr_cls and
ocr_rec_wW). The pipeline is PaddleOCR's:

  det  the page shrunk (aspect kept) to fit the detector's served HxW, padded,
       RGB/255 normalized with ImageNet's mean and std, NCHW; DB
       post-processing: threshold the probability map, connected components,
       a box per component, dropped when its mean probability is low,
       expanded ("unclip") by area * 1.5 / perimeter, sorted top to bottom
       then left to right
  cls  each crop at height 48, aspect kept, (x/255 - 0.5) / 0.5, padded right
       with zeros to 192 (a longer line: three windows of it, averaged);
       turned 180 degrees when the classifier says so
  rec  the same at the narrowest served width that holds the crop (a line
       wider than the widest is read in pieces cut at its emptiest columns);
       CTC greedy decode: index 0 is the blank, then the dictionary's lines,
       then a space

packrat serves one fixed shape per model today (dims in config.json), so the
client resizes and pads to the served shapes it reads from the models'
metadata; with dynamic shapes the server could take each crop at its own
width. Boxes are axis-aligned: enough for horizontal text, not for skewed
scans. Requests use the v2 binary tensor extension. Needs only the standard
library, numpy and PIL (Debian: python3-numpy, python3-pil).
"""
import argparse
import http.client
import json
import math
import os
import sys
import time
import urllib.parse

import numpy as np
from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
DET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
DET_STD = np.array([0.229, 0.224, 0.225], np.float32)
DET_THRESH = 0.3  # a pixel is text above this probability (PaddleOCR's det_db_thresh)
BOX_THRESH = 0.6  # a box is kept when its mean probability is above this (det_db_box_thresh)
UNCLIP = 1.5  # det_db_unclip_ratio
MIN_SIDE = 3  # boxes thinner than this (in map pixels) are noise
CLS_THRESH = 0.9  # turned when the classifier says 180 with at least this score


class Client:
    """One keep-alive connection to packrat's v2 HTTP API."""

    def __init__(self, url, timeout=60):
        u = urllib.parse.urlparse(url)
        self.conn = http.client.HTTPConnection(u.hostname, u.port or 80, timeout=timeout)
        self.meta = {}

    def request(self, method, path, body=None, headers=None):
        self.conn.request(method, path, body=body, headers=headers or {})
        r = self.conn.getresponse()
        return r.status, r.read(), r

    def metadata(self, model):
        if model not in self.meta:
            st, body, _ = self.request("GET", f"/v2/models/{model}")
            if st != 200:
                raise RuntimeError(f"{model}: metadata {st} {body[:200]!r}")
            self.meta[model] = json.loads(body)
        return self.meta[model]

    def input_shape(self, model):
        """The served input shape, batch axis (-1) left out."""
        return self.metadata(model)["inputs"][0]["shape"][1:]

    def infer(self, model, x):
        """Runs one FP32 tensor (with its batch axis) through model; its first output."""
        m = self.metadata(model)
        x = np.ascontiguousarray(x, np.float32)
        raw = x.tobytes()
        header = json.dumps({
            "inputs": [{"name": m["inputs"][0]["name"], "datatype": "FP32", "shape": list(x.shape),
                        "parameters": {"binary_data_size": len(raw)}}],
            "outputs": [{"name": m["outputs"][0]["name"], "parameters": {"binary_data": True}}],
        }).encode()
        st, body, r = self.request("POST", f"/v2/models/{model}/infer", header + raw, {
            "Content-Type": "application/octet-stream",
            "Inference-Header-Content-Length": str(len(header))})
        if st != 200:
            raise RuntimeError(f"{model}: infer {st} {body[:300]!r}")
        n = int(r.getheader("Inference-Header-Content-Length", len(body)))
        out = json.loads(body[:n])["outputs"][0]
        if out["datatype"] != "FP32":
            raise RuntimeError(f"{model}: output datatype {out['datatype']}")
        return np.frombuffer(body[n:], np.float32).reshape(out["shape"])


def render(lines, size=32, margin=24, spacing=20):
    """White page, black text in DejaVu Sans, one row per line."""
    font = ImageFont.truetype(FONT, size)
    boxes = [font.getbbox(line) for line in lines]
    width = max(b[2] for b in boxes) + 2 * margin
    row = size + spacing
    page = Image.new("RGB", (width, 2 * margin + row * len(lines) - spacing), "white")
    draw = ImageDraw.Draw(page)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * row), line, fill="black", font=font)
    return page


# --- detection ---------------------------------------------------------------

def det_input(page, height, width):
    """NCHW tensor of the page in the served HxW and its scale: shrunk (aspect
    kept) when larger, never enlarged (PaddleOCR's limit_type "max": text drawn
    larger than the model was trained on gets boxes too tight for the
    recognizer), zero padded."""
    scale = min(1.0, height / page.height, width / page.width)
    w, h = max(1, round(page.width * scale)), max(1, round(page.height * scale))
    img = np.asarray(page.convert("RGB").resize((w, h), Image.BILINEAR), np.float32) / 255.0
    x = np.zeros((1, 3, height, width), np.float32)
    x[0, :, :h, :w] = ((img - DET_MEAN) / DET_STD).transpose(2, 0, 1)
    return x, scale, (h, w)


def components(mask):
    """Labels of the 8-connected components of a boolean map: (label map, count).

    Row runs joined with a union-find: the map is mostly background, so this
    touches runs, not pixels."""
    parent = []

    def find(a):
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    runs_above = []  # (start, end, label) of the row above
    all_runs = []  # (row, start, end, label)
    for y in range(mask.shape[0]):
        row = np.concatenate(([0], mask[y].view(np.int8), [0]))
        edges = np.flatnonzero(np.diff(row))
        runs = []
        for s, e in zip(edges[::2], edges[1::2]):  # [s, e)
            label = -1
            for ps, pe, pl in runs_above:
                if ps <= e and pe >= s:  # overlapping or diagonal: 8-connected
                    if label < 0:
                        label = find(pl)
                    else:
                        a, b = find(pl), label
                        if a != b:
                            parent[max(a, b)] = min(a, b)
                            label = min(a, b)
            if label < 0:
                label = len(parent)
                parent.append(label)
            runs.append((s, e, label))
            all_runs.append((y, s, e, label))
        runs_above = runs
    roots = {}
    labels = np.full(mask.shape, -1, np.int32)
    for y, s, e, label in all_runs:
        labels[y, s:e] = roots.setdefault(find(label), len(roots))
    return labels, len(roots)


def boxes_from_map(prob, region, scale, page_size):
    """DB post-processing: boxes (x0, y0, x1, y1, score) in page pixels."""
    h, w = region
    prob = prob[:h, :w]
    labels, n = components(prob > DET_THRESH)
    boxes = []
    for k in range(n):
        ys, xs = np.nonzero(labels == k)
        x0, x1, y0, y1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
        bw, bh = x1 - x0, y1 - y0
        if min(bw, bh) < MIN_SIDE:
            continue
        score = float(prob[ys, xs].mean())
        if score < BOX_THRESH:
            continue
        # the shrunk text kernel grown back: DB's unclip distance for a rectangle
        d = bw * bh * UNCLIP / (2 * (bw + bh))
        pw, ph = page_size
        boxes.append((max(0, int((x0 - d) / scale)), max(0, int((y0 - d) / scale)),
                      min(pw, int(math.ceil((x1 + d) / scale))),
                      min(ph, int(math.ceil((y1 + d) / scale))), score))
    return sort_boxes(boxes)


def sort_boxes(boxes):
    """Top to bottom, then left to right within a line (PaddleOCR's sorted_boxes)."""
    boxes = sorted(boxes, key=lambda b: (b[1], b[0]))
    for i in range(1, len(boxes)):
        j = i
        while j > 0 and abs(boxes[j][1] - boxes[j - 1][1]) < 10 and boxes[j][0] < boxes[j - 1][0]:
            boxes[j], boxes[j - 1] = boxes[j - 1], boxes[j]
            j -= 1
    return boxes


# --- classification and recognition ------------------------------------------

def line_input(crop, width, height=48):
    """NCHW tensor: height 48, aspect kept (squeezed to width at most),
    (x/255 - 0.5) / 0.5, zero padded on the right to width."""
    w = min(width, max(1, math.ceil(height * crop.width / crop.height)))
    img = np.asarray(crop.convert("RGB").resize((w, height), Image.BILINEAR), np.float32)
    x = np.zeros((1, 3, height, width), np.float32)
    x[0, :, :, :w] = ((img / 255.0 - 0.5) / 0.5).transpose(2, 0, 1)
    return x


def split_line(crop, max_width):
    """The crop cut into pieces of at most max_width pixels, each cut where
    the least ink is in the last 40% of the piece (a gap between words, on
    printed text)."""
    gray = np.asarray(crop.convert("L"), np.float32)
    ink = np.abs(gray - np.median(gray)).sum(axis=0)
    # summed over a quarter of the height: a gap between words, not letters
    k = max(3, crop.height // 4)
    ink = np.convolve(ink, np.ones(k), "same")
    pieces, start, max_width = [], 0, max(8, max_width)
    while crop.width - start > max_width:
        lo = start + int(max_width * 0.6)
        cut = max(start + 1, lo + int(np.argmin(ink[lo:start + max_width])))
        pieces.append(crop.crop((start, 0, cut, crop.height)))
        start = cut
    pieces.append(crop.crop((start, 0, crop.width, crop.height)))
    return pieces


def load_dict(path):
    """CTC classes: blank, the dictionary's lines, a space (PaddleOCR's use_space_char)."""
    with open(path, encoding="utf-8") as f:
        return [""] + [line.rstrip("\r\n") for line in f] + [" "]


def ctc_greedy(probs, chars):
    """(text, mean probability of its characters) from a [T, classes] map."""
    best = probs.argmax(axis=1)
    keep = (best != 0) & np.concatenate(([True], best[1:] != best[:-1]))
    text = "".join(chars[i] for i in best[keep])
    score = float(probs.max(axis=1)[keep].mean()) if keep.any() else 0.0
    return text, score


class Pipeline:
    """det -> crops -> cls -> rec against one packrat server."""

    def __init__(self, client, chars):
        self.c = client
        self.chars = chars
        models = [m for m in self.list_models() if m.startswith("ocr_rec_w")]
        if not models:
            raise RuntimeError("no ocr_rec_wW model served (make_repo.py makes them)")
        self.rec = sorted((self.c.input_shape(m)[2], m) for m in models)
        classes = self.c.metadata(self.rec[0][1])["outputs"][0]["shape"][-1]
        if classes != len(chars):
            raise RuntimeError(f"the recognizer has {classes} classes, the dictionary "
                               f"{len(chars)} (blank + lines + space)")

    def list_models(self):
        st, body, _ = self.c.request("POST", "/v2/repository/index", b"{}")
        if st != 200:
            raise RuntimeError(f"repository index: {st} {body[:200]!r}")
        return [m["name"] for m in json.loads(body) if m.get("state", "READY") == "READY"]

    def detect(self, page):
        _, h, w = self.c.input_shape("ocr_det")
        x, scale, region = det_input(page, h, w)
        prob = self.c.infer("ocr_det", x)[0, 0]
        return boxes_from_map(prob, region, scale, page.size)

    def upright(self, crop):
        """(crop turned upright, turned?). A line wider than the classifier's
        input is judged on three windows of that aspect (left, middle,
        right), not squeezed into it."""
        _, h, w = self.c.input_shape("ocr_cls")
        span = min(crop.width, math.ceil(crop.height * w / h))
        starts = sorted({0, (crop.width - span) // 2, crop.width - span})
        p = np.mean([self.c.infer("ocr_cls", line_input(
            crop.crop((x, 0, x + span, crop.height)), w, h))[0] for x in starts], axis=0)
        if p.argmax() == 1 and p[1] >= CLS_THRESH:  # labels: 0, 180
            return crop.rotate(180), True
        return crop, False

    def recognize(self, crop):
        """(text, score) of a line; a line wider than the widest served
        recognizer is read in pieces cut at its emptiest columns."""
        widest = self.rec[-1][0]
        pieces = split_line(crop, widest * crop.height // 48)
        texts, scores = [], []
        for piece in pieces:
            need = math.ceil(48 * piece.width / piece.height)
            width, model = next((w, m) for w, m in self.rec if w >= min(need, widest))
            text, score = ctc_greedy(self.c.infer(model, line_input(piece, width))[0], self.chars)
            texts.append(text)
            scores.append(score)
        return " ".join(t.strip() for t in texts if t.strip()), min(scores)

    def run(self, page):
        """[{box, det_score, turned, text, score}] in reading order."""
        page = page.convert("RGB")
        out = []
        for x0, y0, x1, y1, det_score in self.detect(page):
            crop = page.crop((x0, y0, x1, y1))
            if crop.height >= 1.5 * crop.width:  # vertical: read it turned (get_rotate_crop_image)
                crop = crop.rotate(90, expand=True)
            crop, turned = self.upright(crop)
            text, score = self.recognize(crop)
            out.append({"box": [x0, y0, x1, y1], "det_score": round(det_score, 3),
                        "turned": turned, "text": text, "score": round(score, 3)})
        return out


def find_dict(repository):
    """The dictionary make_repo.py put next to a recognizer of the repository."""
    for name in sorted(os.listdir(repository)):
        path = os.path.join(repository, name, "ppocr_keys_v1.txt")
        if name.startswith("ocr_rec_w") and os.path.isfile(path):
            return path
    raise SystemExit(f"ocr.py: no ocr_rec_wW/ppocr_keys_v1.txt in {repository}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="text to render and read; \\n separates lines")
    src.add_argument("--image", help="an image file to read")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--repository", help="the repository make_repo.py made (for the "
                       "recognizer's dictionary, ocr_rec_wW/ppocr_keys_v1.txt)")
    where.add_argument("--dict", help="the recognizer's dictionary, ppocr_keys_v1.txt")
    ap.add_argument("--save", help="write the rendered page to this file")
    ap.add_argument("--json", action="store_true", help="print the results as one JSON object")
    a = ap.parse_args()
    if a.image:
        page = Image.open(a.image)
    else:
        page = render(a.text.replace("\\n", "\n").split("\n"))
    if a.save:
        page.save(a.save)
    path = a.dict or find_dict(a.repository)
    t = time.perf_counter()
    results = Pipeline(Client(a.url), load_dict(path)).run(page)
    ms = (time.perf_counter() - t) * 1000
    if a.json:
        print(json.dumps({"results": results, "ms": round(ms, 1)}))
    else:
        for r in results:
            print(f"{r['text']}\t(score {r['score']:.3f}, box {r['box']}"
                  f"{', turned 180' if r['turned'] else ''})")
        print(f"{len(results)} boxes in {ms:.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
