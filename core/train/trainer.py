"""Train the from-scratch encoder: masked-LM, contrastive (unsupervised SimCSE), MLM then SimCSE, or
next-token prediction under a causal mask (clm).

    cfg = TrainConfig(corpus="assets/sample_corpus.txt", out="runs/tiny", steps=500)
    summary = Trainer(cfg).run(progress=print, cancel=threading.Event())

``run`` reports dict events to ``progress`` (see EVENT KINDS below), stops cleanly when
``cancel`` is set (an Event, or a callable returning True) after saving a checkpoint, and returns
the summary dict the CLI prints as its last line.

The output folder is a model folder (``--model OUT`` everywhere): ``model.safetensors`` +
``encoderscope.json`` + tokenizer files, plus ``trainer_state.json`` / ``trainer_state.safetensors``
(optimizer moments, RNG states, data position: no pickle) so that ``resume`` continues the same
run. Checkpoints are written to a temporary folder and renamed into place, so a cancel or a
kill leaves the previous complete checkpoint or the new one, never half of each.

EVENT KINDS (every event has "kind", "step", "total"):
    status      {"message"}                                      setting up (reading, tokenizing ...)
    start       {"device", "precision", "params", "vocab_size", "train_sentences",
                 "heldout_sentences", "objective", "history"}   training begins (history: resumed)
    step        {"phase", "loss", "lr", "tokens_per_s", "elapsed_s", "eta_s"}   every log_every steps
    eval        {"phase", "heldout_loss", "heldout_mlm_loss", "heldout_mlm_accuracy",
                 "heldout_clm_loss", "heldout_clm_accuracy",
                 "unigram_loss", "unigram_accuracy", "heldout_simcse_loss", "alignment",
                 "uniformity", "pair_cosine", "unrelated_cosine"}   (absent metrics are None)
    grads       {"groups", "grad_norm", "update_ratio", "total_grad_norm"}   every log step when watching:
                per parameter group ("embeddings", "layer 1 attention", "layer 1 FFN", ..., "final norm",
                "MLM head"; groups without a gradient that step are left out) the gradient norm after
                backward, before clipping, and the optimizer update's ||w_after - w_before|| / ||w_before||
    probe       {"snapshot", "probe_sentence", "tokens", "entropy", "probe_texts", "probe_cosine",
                 "anisotropy"}   at step 0, every probe_every steps and at the end when watching:
                the probe sentence's tokens and each head's attention entropy (layers x heads, nats,
                mean over its query rows), the probe set's pairwise cosine matrix, the anisotropy
                (mean cosine of all pairs of a fixed sample of training sentences), and the snapshot
                file (relative to the output folder) holding the attentions (core/train/run_folder.py)
    checkpoint  {"path"}
    done        the summary (also returned), with "cancelled": bool

Every event is also appended to ``metrics.jsonl`` in the output folder (core/train/run_folder.py).
"""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable
from pathlib import Path

import torch

from core.device import describe_device
from core.errors import EncoderscopeError, settings_fix
from core.files.folder_lock import OutputFolderLock
from core.train.checkpoint import STATE_JSON
from core.train.config import TrainConfig
from core.train.data import read_corpus
from core.train.saving import TrainerCheckpoints
from core.train.setup import TrainerSetup
from core.train.step import TrainingStep

HELDOUT_LOSS = {"simcse": "heldout_simcse_loss", "clm": "heldout_clm_loss"}   # phase -> its held-out loss (else MLM's)


class Trainer(TrainerSetup, TrainingStep, TrainerCheckpoints):
    """A training run: setup (core/train/setup.py), steps (step.py), checkpoints (saving.py)."""

    def __init__(self, config: TrainConfig, read_corpus: Callable[..., list[str]] = read_corpus):
        """read_corpus(source, limit=..., encoding=...) -> sentences: core's file reader by default; the app
        passes index.corpus.door.read_training_corpus, which reads stores too."""
        self.config = config
        self.read_corpus = read_corpus
        self.model = None           # EncoderForMaskedLM or Encoder, on self.device
        self.tokenizer = None
        self.device = None
        self.precision = None
        self.step = 0
        self.history: dict = {"train": [], "eval": []}
        self.added_head = False     # a fresh MLM head was put on imported weights
        self._progress: Callable = lambda ev: None
        self.metrics = None         # run_folder.MetricsLog: every event, also on disk
        self.grad_flow = None       # GradFlow and Probe while watching
        self.probe = None

    # ---- public ---------------------------------------------------------------------------
    def run(self, progress: Callable[[dict], None] | None = None, cancel=None) -> dict:
        """Train to ``config.steps``; returns the summary (also sent as the "done" event)."""
        self._progress = progress or (lambda ev: None)
        threads = torch.get_num_threads()
        if self.config.threads > 0:
            torch.set_num_threads(self.config.threads)
        try:
            with OutputFolderLock(self.config.out, "train"):
                return self._run(cancel_check(cancel))
        finally:
            torch.set_num_threads(threads)

    def _run(self, is_cancelled) -> dict:
        started = time.perf_counter()
        self._setup()
        c = self.config
        total = c.steps
        self._emit("start", device=describe_device(self.device), precision=self.precision,
                   params=sum(p.numel() for p in self.model.parameters()),
                   vocab_size=len(self.tokenizer), train_sentences=len(self.train_ids),
                   heldout_sentences=len(self.eval_ids), objective=c.objective,
                   history=copy.deepcopy(self.history), out=str(c.out))
        if self.step == 0 and self.eval_ids:
            self._evaluate()
        if self.step == 0 and self.probe:
            self._probe()
        if self.step >= total:
            self._emit("status", message=f"the checkpoint is already at step {self.step} of {total}")

        win_loss, win_n, win_tokens = torch.zeros((), device=self.device), 0, 0
        win_start = time.perf_counter()
        run_start_step, run_start_time = self.step, time.perf_counter()
        cancelled = False
        last_ckpt = self.step if c.resume else -1
        self.model.train()
        while self.step < total:
            if is_cancelled():
                cancelled = True
                break
            phase = self._phase(self.step)
            lr = self._lr(self.step)
            for g in self.opt.param_groups:
                g["lr"] = lr
            loss, tokens = self._train_step(phase, watch=self._log_due(self.step + 1, phase))
            self.step += 1
            win_loss += loss.detach().float()
            win_n += 1
            win_tokens += tokens
            if self._log_due(self.step, phase):
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                now = time.perf_counter()
                mean = float(win_loss) / win_n
                if not math.isfinite(mean):
                    raise EncoderscopeError(f"the loss became {mean} at step {self.step}: lower the "
                                            "learning rate or use fp32", fix=settings_fix(lr=None, precision="fp32"))
                per_step = (now - run_start_time) / max(1, self.step - run_start_step)
                ev = dict(phase=phase, loss=mean, lr=lr, tokens_per_s=win_tokens / max(now - win_start, 1e-9),
                          elapsed_s=now - started, eta_s=per_step * (total - self.step))
                self.history["train"].append({"step": self.step, "phase": phase, "loss": mean, "lr": lr})
                self._emit("step", **ev)
                if self.grad_flow and (grads := self.grad_flow.report()):
                    self._emit("grads", **grads)
                win_loss.zero_()
                win_n = win_tokens = 0
                win_start = now
            if self.eval_ids and (self.step % self.eval_every == 0 or self.step == total):
                self._evaluate()
                self.model.train()
                win_start = time.perf_counter()
            if self.probe and (self.step % self.probe_every == 0 or self.step == total):
                self._probe()
                win_start = time.perf_counter()
            if c.checkpoint_every and self.step % c.checkpoint_every == 0 and self.step < total:
                self._checkpoint()
                last_ckpt = self.step
                win_start = time.perf_counter()
        if last_ckpt != self.step or not (Path(c.out) / STATE_JSON).is_file():
            self._checkpoint()
        seconds = time.perf_counter() - started
        trained = self.step - run_start_step
        summary = self._summary(cancelled, seconds, trained)
        self._emit("done", **summary)
        return summary

    def _evaluate(self) -> dict:
        m = self.evaluator.evaluate()
        phase = self._phase(max(self.step - 1, 0))
        m["heldout_loss"] = m[HELDOUT_LOSS.get(phase, "heldout_mlm_loss")]
        m["phase"] = phase
        self.history["eval"].append({"step": self.step, **m})
        self._emit("eval", **m)
        return m

    def _probe(self) -> None:
        self._emit("probe", **self.probe.run(self.step))

    # ---- reporting ------------------------------------------------------------------------
    def _emit(self, kind: str, **data) -> None:
        event = {"kind": kind, "step": self.step, "total": self.config.steps, **data}
        if self.metrics is not None:
            self.metrics.append(event)
        self._progress(event)


def cancel_check(cancel) -> Callable[[], bool]:
    """``cancel`` (None, a threading.Event, or a callable returning True) as one callable."""
    if cancel is None:
        return lambda: False
    if hasattr(cancel, "is_set"):
        return cancel.is_set
    return cancel
