"""Runs Megatron-LM's multimodal data code, unchanged, on energon_rs: `examples/multimodal/`
(`dataloader_provider.py`, `dataset_helpers.py`, `image_processing.py`) with the real
`megatron.core`, through `energon_rs.compat.install()`. It builds the train and validation loaders
as a training run does, reads batches, saves the loader state with `torch.save`, and checks that a
second run, restoring it as `dataloader_provider` does, continues with exactly the next batches.

    python scripts/check-megatron-lm.py MEGATRON_LM_CHECKOUT [DATASET]

DATASET defaults to the repository's small fixture (a CaptioningSample WebDataset). The training
run around the data code (its arguments and tokenizer, from `megatron.training`) is stood in for
here: the data code only asks it for `get_args()` and `get_tokenizer()`. Needs torch and
torchvision beside energon_rs.
"""
import argparse
import json
import os
import sys
import tempfile
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
mlm = sys.argv[1]
dataset = sys.argv[2] if len(sys.argv) > 2 else str(REPO / "tests/fixtures/energon-ref-small")
out = tempfile.mkdtemp(prefix="megatron-lm-check.")
data = os.path.join(out, "meta.yaml")
with open(data, "w") as f:
    f.write(
        "__module__: megatron.energon\n__class__: MetadatasetV2\nsplits:\n"
        f"  train:\n    path: {dataset}\n  val:\n    path: {dataset}\n    split_part: train\n"
    )
sys.path[:0] = [os.path.join(mlm, "examples", "multimodal"), mlm]

import energon_rs.compat  # noqa: E402
energon_rs.compat.install()

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

# The training run around the data code: its arguments and tokenizer (megatron.training itself
# needs a model and Python 3.12; the data code only asks it for these two).
args = argparse.Namespace(
    prompt_path=os.path.join(out, "prompts.json"), dataloader_seq_length=None,
    packing_seq_length=0, packing_buffer_size=None, img_h=56, img_w=56, patch_dim=14,
    vision_model_type="clip", disable_vision_class_token=False, pixel_shuffle=False,
    use_tile_tags=False, max_num_tiles=1, tokenizer_prompt_format="chatml",
    use_area_weighted_aspect_ratio=False, use_tiling=False, use_thumbnail=False, freeze_LM=False,
    decoder_seq_length=256, num_frames=1, context_parallel_size=1, tensor_model_parallel_size=1,
    sequence_parallel=False, fp8=None, fp8_recipe=None, micro_batch_size=4, num_workers=2,
    data_path=[data], eval_iters=3, load=None, dataloader_save=None,
)
with open(args.prompt_path, "w") as f:
    json.dump({"CaptioningPretraining": {"raw": ["Describe.", "What is shown?", "Caption it."]}}, f)


class Tokenizer:
    pad = 0

    def convert_tokens_to_ids(self, token):
        return 1

    def tokenize_conversation(self, conv, return_target, add_generation_prompt):
        ids = []
        for turn in conv:
            text = turn["content"].replace("<image>", "\x01")
            ids += [b % 250 + 2 if b != 1 else 1 for b in text.encode()]
        ids = np.array(ids, dtype=np.int64)
        return ids, ids.copy()


training = types.ModuleType("megatron.training")
training.get_args = lambda: args
training.get_tokenizer = lambda: Tokenizer()
checkpointing = types.ModuleType("megatron.training.checkpointing")
checkpointing.get_checkpoint_name = lambda *a, **k: os.path.join(out, "ckpt.pt")
training.checkpointing = checkpointing
sys.modules["megatron.training"] = training
sys.modules["megatron.training.checkpointing"] = checkpointing

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29533")
dist.init_process_group("gloo", rank=0, world_size=1)
from megatron.core import parallel_state

parallel_state.initialize_model_parallel()
from megatron.core.num_microbatches_calculator import init_num_microbatches_calculator

init_num_microbatches_calculator(0, None, args.micro_batch_size, args.micro_batch_size, 1)

import dataloader_provider  # noqa: E402  (Megatron-LM's file)


def keys(batch):
    return list(batch["__key__"])


def run():
    train, valid, _ = dataloader_provider.train_valid_test_dataloaders_provider([0, 0, 0])
    return train, valid


train, valid = run()
it = iter(train)
first = [keys(next(it)) for _ in range(5)]
batch = next(it)
print("batch fields:", sorted(batch))
print("tokens", tuple(batch["tokens"].shape), batch["tokens"].dtype, "imgs", tuple(batch["imgs"].shape))
state = train.save_state()
torch.save({"dataloader_state_dict": state}, os.path.join(out, "ckpt.pt"))
after = [keys(next(it)) for _ in range(4)]
val = [keys(b) for b, _ in zip(valid[0], range(3))]
print("val batches", val)

# A new run restores the saved state the way dataloader_provider does (args.load set).
args.load = out
args.dataloader_save = out
args.iteration = 6
train2, _ = run()
it2 = iter(train2)
resumed = [keys(next(it2)) for _ in range(4)]
print("first", first[0])
print("after save", after[0], "resumed", resumed[0])
assert resumed == after, (resumed, after)
print("OK: Megatron-LM's dataloader_provider ran, saved and resumed exactly")
