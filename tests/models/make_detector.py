#!/usr/bin/python3
"""A small single-stage detector that ends in NonMaxSuppression, exported by
PyTorch (Debian's python3-torch and python3-torchvision; random weights,
fixed seed): a conv backbone, a head that predicts a box and class scores
per anchor of a 8x8 grid, then torchvision's batched_nms (exported as ONNX
NonMaxSuppression) and the kept boxes, scores and labels gathered, so the
outputs' length depends on the data.

usage: make_detector.py OUT.onnx
"""
import sys

import torch
import torchvision
from torch import nn


class Detector(nn.Module):
    def __init__(self, classes=3):
        super().__init__()
        self.classes = classes
        self.backbone = nn.Sequential(
            nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
            nn.Conv2d(32, 32, 3, 2, 1), nn.ReLU())
        self.box = nn.Conv2d(32, 4, 1)
        self.cls = nn.Conv2d(32, classes, 1)

    def forward(self, x):
        f = self.backbone(x)                                   # [1, 32, 8, 8]
        n = f.shape[2] * f.shape[3]
        d = self.box(f).flatten(2).transpose(1, 2)[0]          # [64, 4]
        ys = torch.arange(f.shape[2], dtype=torch.float32)
        xs = torch.arange(f.shape[3], dtype=torch.float32)
        cy, cx = torch.meshgrid(ys, xs, indexing="ij")
        centers = torch.stack([cx.reshape(-1), cy.reshape(-1)], 1) * 8 + 4
        wh = torch.exp(d[:, 2:].clamp(max=2)) * 24
        xy = centers + d[:, :2] * 4
        boxes = torch.cat([xy - wh / 2, xy + wh / 2], 1)       # [64, 4] x1 y1 x2 y2
        scores = torch.sigmoid(self.cls(f).flatten(2)[0])      # [classes, 64]
        best, labels = scores.max(0)
        keep = best > 0.5
        boxes, best, labels = boxes[keep], best[keep], labels[keep]
        kept = torchvision.ops.batched_nms(boxes, best, labels, 0.4)
        return boxes[kept], best[kept], labels[kept]


def main():
    torch.manual_seed(0)
    model = Detector().eval()
    x = torch.rand(1, 3, 64, 64)
    torch.onnx.export(model, x, sys.argv[1], opset_version=13, input_names=["image"],
                      output_names=["boxes", "scores", "labels"])


if __name__ == "__main__":
    main()
