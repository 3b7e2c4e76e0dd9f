"""The trainer's checkpoints: the model folder with the optimizer moments, RNG states and data
position beside it (safetensors + JSON, no pickle), written atomically; and resuming from one."""
from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load, save_file

from core.device import describe_device
from core.encoder.weights import save_checkpoint
from core.errors import InputError, settings_fix
from core.files.atomic import readable_as_umask_allows, writing
from core.train import run_folder
from core.train.checkpoint import (
    STATE_JSON,
    STATE_TENSORS,
    STATE_VERSION,
    atomic_folder,
    optimizer_state,
    optimizer_tensors,
)
from core.train.data import BatchSampler


class TrainerCheckpoints:
    """Trainer._checkpoint / _restore, and the summary a run ends with (a part of Trainer)."""

    def _checkpoint(self) -> Path:
        c = self.config
        last_eval = self.history["eval"][-1] if self.history["eval"] else {}
        info = {"objective": c.objective, "step": self.step, "total_steps": c.steps,
                "corpus": str(c.corpus), "device": describe_device(self.device),
                "precision": self.precision, "init": c.init if not c.resume else f"resumed {c.resume}",
                "heldout_mlm_loss": last_eval.get("heldout_mlm_loss"),
                "heldout_mlm_accuracy": last_eval.get("heldout_mlm_accuracy"),
                "saved": time.strftime("%Y-%m-%dT%H:%M:%S")}

        def write(folder: Path) -> None:
            model = self.model
            save_checkpoint(model, self.tokenizer, folder, extra={"training": info})
            tensors, groups = optimizer_tensors(self.opt)
            tensors["rng.torch"] = torch.get_rng_state()
            tensors["rng.mask"] = self.mask_gen.get_state()
            if self.device.type == "cuda":
                tensors["rng.cuda"] = torch.cuda.get_rng_state(self.device)
            with writing(folder / STATE_TENSORS):
                save_file(tensors, str(folder / STATE_TENSORS))
                readable_as_umask_allows(folder / STATE_TENSORS)
            state = {"version": STATE_VERSION, "step": self.step, "config": c.to_dict(),
                     "peak_lr": self.peak_lr, "sampler": self.sampler.state(),
                     "param_groups": groups, "history": self.history, "precision": self.precision}
            with writing(folder / STATE_JSON):
                (folder / STATE_JSON).write_text(json.dumps(state), encoding="utf-8")
            run_folder.carry_over(c.out, folder)

        out = atomic_folder(Path(c.out).expanduser(), write)
        self._emit("checkpoint", path=str(out))
        return out

    def _restore(self, folder: Path, saved: dict) -> None:
        if saved.get("version") != STATE_VERSION:
            raise InputError(f"{folder}: training state version {saved.get('version')} is not supported")
        # Read into memory, not mapped: the optimizer keeps these tensors, and the next checkpoint
        # deletes the folder they came from, which Windows refuses while the file is mapped.
        from safetensors import SafetensorError
        try:
            tensors = load((folder / STATE_TENSORS).read_bytes())
            state = optimizer_state(tensors, saved["param_groups"])
        except (SafetensorError, OSError, KeyError, TypeError, ValueError, RuntimeError) as e:
            raise self._damaged(folder, e) from None
        try:
            self.opt.load_state_dict(state)
        except (ValueError, KeyError) as e:
            raise InputError(f"the optimizer state in {folder} does not fit the model: {e}") from None
        for st in self.opt.state.values():         # moments live where the parameters do
            for k, v in st.items():
                if torch.is_tensor(v) and k != "step":
                    st[k] = v.to(self.device)
        try:
            torch.set_rng_state(tensors["rng.torch"])
            self.mask_gen.set_state(tensors["rng.mask"])
            if self.device.type == "cuda" and "rng.cuda" in tensors:
                torch.cuda.set_rng_state(tensors["rng.cuda"], self.device)
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise self._damaged(folder, e) from None
        self.step = int(saved["step"])
        s = saved.get("sampler", {})
        self.sampler = BatchSampler(len(self.train_ids), self.config.batch_size, self.config.seed,
                                    int(s.get("epoch", 0)), min(int(s.get("position", 0)), len(self.train_ids)))
        self.history = saved.get("history") or {"train": [], "eval": []}

    @staticmethod
    def _damaged(folder: Path, e: Exception) -> InputError:
        """A trainer_state.safetensors that cannot be read or lacks what a resume needs."""
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:160]}" if str(e) else type(e).__name__
        return InputError(f"cannot resume from {folder}: its {STATE_TENSORS} is damaged ({why}); "
                          "start a new run from its weights instead", fix=settings_fix(init=str(folder)))

    def _summary(self, cancelled: bool, seconds: float, trained: int) -> dict:
        ev = self.history["eval"]
        last = ev[-1] if ev else {}
        first = ev[0] if ev and ev[0]["step"] == 0 else {}
        phase = self._phase(max(self.step - 1, 0))
        tail = [h["loss"] for h in self.history["train"] if h["phase"] == phase][-5:]
        return {
            "steps": self.step,
            "train_loss": float(np.mean(tail)) if tail else None,
            "heldout_mlm_loss": last.get("heldout_mlm_loss"),
            "heldout_mlm_accuracy": last.get("heldout_mlm_accuracy"),
            "heldout_clm_loss": last.get("heldout_clm_loss"),
            "heldout_clm_accuracy": last.get("heldout_clm_accuracy"),
            "unigram_loss": last.get("unigram_loss"),
            "unigram_accuracy": last.get("unigram_accuracy"),
            "initial_heldout_mlm_loss": first.get("heldout_mlm_loss"),
            "heldout_simcse_loss": last.get("heldout_simcse_loss"),
            "alignment": last.get("alignment"),
            "uniformity": last.get("uniformity"),
            "pair_cosine": last.get("pair_cosine"),
            "unrelated_cosine": last.get("unrelated_cosine"),
            "objective": self.config.objective,
            "device": describe_device(self.device),
            "precision": self.precision,
            "seconds": round(seconds, 2),
            "steps_this_run": trained,
            "out": str(Path(self.config.out).expanduser()),
            "mlm_head": self.has_mlm,
            "cancelled": cancelled,
        }
