"""A minimal training loop on energon_rs: a tiny image-text model (CLIP-style contrastive loss)
trained on the reference fixture's images and captions.

    python examples/train_tiny.py [DATASET] [--steps 40] [--num-workers 2] [--batch-size 16]

Only energon_rs and torch are used: energon_rs reads, decodes, shuffles and batches in Rust
worker threads and hands out torch tensors (no copy); a checkpoint of the loader is saved
halfway and restored into a fresh loader, which continues exactly where the first stopped.
Exits non-zero if the loss did not go down.
"""

from __future__ import annotations

import argparse
import zlib
from pathlib import Path

import torch
import torch.nn.functional as F

import energon_rs

DEFAULT_DATASET = Path(__file__).resolve().parents[1] / "tests/fixtures/energon-ref-small"
VOCAB = 512


def tokenize(captions: list[str], length: int = 8) -> torch.Tensor:
    """Words hashed into a small vocabulary, padded with 0."""
    ids = torch.zeros((len(captions), length), dtype=torch.long)
    for i, caption in enumerate(captions):
        for j, word in enumerate(caption.split()[:length]):
            ids[i, j] = 1 + zlib.crc32(word.encode()) % (VOCAB - 1)
    return ids


class TinyClip(torch.nn.Module):
    def __init__(self, dim: int = 32) -> None:
        super().__init__()
        self.image = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(16, dim, 3, stride=2, padding=1),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
        )
        self.text = torch.nn.EmbeddingBag(VOCAB, dim, padding_idx=0)
        self.scale = torch.nn.Parameter(torch.tensor(2.0))

    def forward(self, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        img = F.normalize(self.image(images), dim=-1)
        txt = F.normalize(self.text(tokens), dim=-1)
        logits = self.scale.exp() * img @ txt.T
        target = torch.arange(len(images))
        return (F.cross_entropy(logits, target) + F.cross_entropy(logits.T, target)) / 2


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", nargs="?", default=str(DEFAULT_DATASET))
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    args = parser.parse_args()

    torch.manual_seed(0)
    worker_config = energon_rs.WorkerConfig(rank=0, world_size=1, num_workers=args.num_workers)

    def loader() -> energon_rs.SavableDataLoader:
        dataset = energon_rs.get_train_dataset(
            args.dataset,
            worker_config=worker_config,
            batch_size=args.batch_size,
            shuffle_buffer_size=64,
            max_samples_per_sequence=None,
            torch=True,
        )
        return energon_rs.get_savable_loader(dataset)

    model = TinyClip()
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses: list[float] = []
    train_loader = loader()
    batches = iter(train_loader)
    for step in range(args.steps):
        if step == args.steps // 2:
            # Checkpoint the loader and resume from it, as a restarted job would.
            state = train_loader.save_state_rank()
            train_loader = loader()
            train_loader.restore_state_rank(state)
            batches = iter(train_loader)
        batch = next(batches)
        assert isinstance(batch.image, torch.Tensor) and batch.image.shape[1:] == (3, 32, 32)
        loss = model(batch.image, tokenize(batch.caption))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        if step % 10 == 0 or step == args.steps - 1:
            print(f"step {step:3d}  loss {loss.item():.4f}  keys {batch.__key__[:2]}")
    k = max(1, args.steps // 5)
    first, last = sum(losses[:k]) / k, sum(losses[-k:]) / k
    print(f"mean loss of the first {k} steps {first:.4f}, of the last {k} steps {last:.4f}")
    return 0 if last < first else 1


if __name__ == "__main__":
    raise SystemExit(main())
