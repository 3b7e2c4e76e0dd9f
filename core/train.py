"""Train the from-scratch encoder: masked-LM, contrastive (unsupervised SimCSE), or MLM then SimCSE.

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
                 "unigram_loss", "unigram_accuracy", "heldout_simcse_loss", "alignment",
                 "uniformity", "pair_cosine", "unrelated_cosine"}   (absent metrics are None)
    checkpoint  {"path"}
    done        the summary (also returned), with "cancelled": bool
"""
from __future__ import annotations

import copy
import json
import math
import shutil
import time
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Callable

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file

from .device import bf16_supported, describe_device, pick_device
from .errors import EncoderscopeError, InputError, ModelUnavailable
from .masking import IGNORE, mask_tokens, special_mask
from .model import Encoder, EncoderConfig, EncoderForMaskedLM
from .pooling import l2_normalize, pool
from .sources import CHECKPOINT_MARKER
from .train_data import BatchSampler, collate, encode, read_corpus, split_heldout
from .weights import load_folder, save_checkpoint

OBJECTIVES = ("mlm", "simcse", "mlm+simcse")
STATE_JSON = "trainer_state.json"
STATE_TENSORS = "trainer_state.safetensors"
STATE_VERSION = 1
MLM_EVAL_TARGETS = 2000   # aim to score about this many masked held-out tokens per evaluation
MLM_EVAL_REPEATS = 10     # ... masking the held-out sentences at most this many times over


@dataclass
class TrainConfig:
    corpus: str = ""               # training text: a .txt/.csv/.tsv/.jsonl file or a store folder
    corpus_encoding: str = ""      # the corpus file's text encoding if not UTF-8 ("" = UTF-8 or its byte-order mark)
    out: str = ""                  # output folder; it becomes a model folder (--model OUT)
    objective: str = "mlm"         # "mlm" | "simcse" | "mlm+simcse" (MLM first, then contrastive)
    init: str = "fresh"            # "fresh" (random weights) | "minilm" | a model folder to keep training
    tokenizer: str = "word"        # fresh only: "word" (vocabulary built from the corpus) | "wordpiece" (minilm's)
    vocab_size: int = 8000         # word tokenizer: largest vocabulary, the 5 specials included
    min_frequency: int = 1         # word tokenizer: words seen fewer times become [UNK]
    layers: int = 2                # fresh: number of encoder blocks
    dim: int = 128                 # fresh: model width D
    heads: int = 4                 # fresh: attention heads (dim must divide by it)
    ffn: int = 512                 # fresh: inner width of the feed-forward network
    positions: str = "learned"     # fresh: "learned" position table or fixed "sinusoidal"
    norm: str = "pre"              # fresh: "pre" (LN before each sublayer; trains easily) or "post" (BERT)
    dropout: float = 0.1           # fresh: dropout on embeddings, sublayers, attention weights
    max_length: int = 64           # longest training sequence in tokens, [CLS]/[SEP] included
    steps: int = 1000              # optimizer steps in all (a resumed run goes on to this many)
    batch_size: int = 32           # sentences per step
    lr: float = 0.0                # peak learning rate; 0 = auto (5e-4 fresh, 5e-5 imported, 2e-4 imported + new MLM head)
    warmup: float = 0.06           # linear warm-up: a fraction of each phase's steps (>= 1: a step count)
    weight_decay: float = 0.01     # AdamW decoupled weight decay (not on biases / LayerNorms)
    grad_clip: float = 1.0         # clip the global gradient norm to this (0 = off)
    mask_prob: float = 0.15        # MLM: share of ordinary tokens picked (then 80/10/10)
    temperature: float = 0.05      # SimCSE: softmax temperature on the cosine similarities
    mlm_fraction: float = 0.5      # mlm+simcse: share of the steps spent on MLM before SimCSE
    heldout: float = 0.05          # share of the corpus held out for evaluation (0 = none)
    eval_every: int = 0            # evaluate every N steps; 0 = auto (steps / 20, at least 10)
    eval_sentences: int = 1000     # evaluate on at most this many held-out sentences
    log_every: int = 10            # report a step event (mean loss of the window) every N steps
    checkpoint_every: int = 0      # save every N steps; 0 = only at the end (and on cancel)
    seed: int = 0                  # seeds weights, data order, masks and dropout
    device: str = "auto"           # "auto" | "cpu" | "cuda" | "cuda:1" | "mps"
    precision: str = "auto"        # "auto" (bf16 autocast where supported) | "fp32" | "bf16"
    threads: int = 0               # CPU threads for this run (0 = torch's default); 1 is fastest for tiny models
    resume: str = ""               # a checkpoint folder: continue its run (weights, optimizer, RNG, data)
    pairs: str = ""                # optional .tsv/.csv with columns a, b (, topic): paraphrase pairs to evaluate
    max_sentences: int = 0         # read at most this many corpus sentences (0 = all)
    overwrite: bool = False        # allow replacing a checkpoint already in `out` (other than the one resumed)

    def validate(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, not {self.objective!r}")
        if self.tokenizer not in ("word", "wordpiece"):
            raise InputError(f"tokenizer must be 'word' or 'wordpiece', not {self.tokenizer!r}")
        if self.positions not in ("learned", "sinusoidal"):
            raise InputError(f"positions must be 'learned' or 'sinusoidal', not {self.positions!r}")
        if self.norm not in ("pre", "post"):
            raise InputError(f"norm must be 'pre' or 'post', not {self.norm!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise InputError(f"precision must be auto, fp32 or bf16, not {self.precision!r}")
        for name in ("steps", "batch_size", "layers", "dim", "heads", "ffn", "max_length"):
            if getattr(self, name) < 1:
                raise InputError(f"{name} must be at least 1, not {getattr(self, name)}")
        if self.dim % self.heads:
            raise InputError(f"dim {self.dim} is not divisible by heads {self.heads}")
        if self.max_length < 3:
            raise InputError("max_length must be at least 3 ([CLS], a token, [SEP])")
        if not 0 < self.mask_prob < 1:
            raise InputError(f"mask_prob must be between 0 and 1, not {self.mask_prob}")
        if self.temperature <= 0:
            raise InputError("temperature must be positive")
        if not 0 <= self.dropout < 1:
            raise InputError(f"dropout must be at least 0 and below 1, not {self.dropout}")
        if self.log_every < 1:
            raise InputError(f"log_every must be at least 1, not {self.log_every}")
        for name in ("lr", "warmup", "weight_decay", "grad_clip", "eval_every", "eval_sentences",
                     "checkpoint_every", "threads", "max_sentences"):
            if getattr(self, name) < 0:
                raise InputError(f"{name} must not be negative, not {getattr(self, name)}")
        if self.objective == "mlm+simcse" and not 0 < self.mlm_fraction < 1:
            raise InputError(f"mlm_fraction must be between 0 and 1, not {self.mlm_fraction}")
        if "simcse" in self.objective:
            if self.batch_size < 2:
                raise InputError("contrastive training needs a batch of at least 2 sentences "
                                 "(the other sentences of the batch are the negatives)")
            if self.init == "fresh" and not self.resume and self.dropout <= 0:
                raise InputError("contrastive (SimCSE) training needs dropout > 0: the two dropout "
                                 "views of a sentence are its positive pair (e.g. --dropout 0.1)")
        if not self.corpus:
            raise InputError("no corpus given: a .txt/.csv/.jsonl file or a store folder")
        if not self.out:
            raise InputError("no output folder given")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def from_checkpoint(cls, folder: str | Path, **changes) -> "TrainConfig":
        """The configuration a checkpoint was trained with, plus ``changes``, set to resume it.
        ``out`` defaults to the checkpoint folder itself."""
        folder = Path(folder).expanduser()
        state = read_trainer_state(folder)
        cfg = cls.from_dict(state["config"])
        changes = {k: v for k, v in changes.items() if v is not None}
        changes.setdefault("out", str(folder))
        return replace(cfg, resume=str(folder), **changes)


# ---------------------------------------------------------------------------------------------
# checkpoint files


def read_trainer_state(folder: Path) -> dict:
    folder = Path(folder)
    recover(folder)
    path = folder / STATE_JSON
    if not path.is_file():
        what = "a model folder without training state" if (folder / CHECKPOINT_MARKER).is_file() \
            else "not a training checkpoint"
        raise InputError(f"cannot resume from {folder}: it is {what} (no {STATE_JSON}); "
                         "use --init FOLDER to start a new run from its weights")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"cannot read {path}: {e}") from None


def _siblings(out: Path) -> tuple[Path, Path]:
    return out.parent / f".{out.name}.tmp", out.parent / f".{out.name}.old"


def recover(out: Path) -> None:
    """Finish a swap a kill interrupted: ``out`` missing but its previous copy still beside it."""
    out = Path(out)
    _, old = _siblings(out)
    if not out.exists() and old.is_dir():
        old.rename(out)


def atomic_folder(out: Path, write: Callable[[Path], None]) -> Path:
    """Write a folder's files into a temporary sibling, then rename it over ``out``."""
    out = Path(out)
    tmp, old = _siblings(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    recover(out)
    shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    tmp.mkdir()
    write(tmp)
    if out.exists():
        out.rename(old)          # from here until the next line, recover() can undo it
    tmp.rename(out)
    shutil.rmtree(old, ignore_errors=True)
    return out


def _optimizer_tensors(opt: torch.optim.Optimizer) -> tuple[dict, list]:
    sd = opt.state_dict()
    tensors = {}
    for idx, st in sd["state"].items():
        for k, v in st.items():
            t = v if torch.is_tensor(v) else torch.tensor(v)
            tensors[f"opt.{idx}.{k}"] = t.detach().contiguous().cpu()
    return tensors, sd["param_groups"]


def _optimizer_state(tensors: dict, groups: list) -> dict:
    state: dict = {}
    for key, t in tensors.items():
        if key.startswith("opt."):
            _, idx, name = key.split(".", 2)
            state.setdefault(int(idx), {})[name] = t
    return {"state": state, "param_groups": groups}


# ---------------------------------------------------------------------------------------------
# the trainer


class Trainer:
    def __init__(self, config: TrainConfig):
        self.config = config
        self.model = None           # EncoderForMaskedLM or Encoder, on self.device
        self.tokenizer = None
        self.device = None
        self.precision = None
        self.step = 0
        self.history: dict = {"train": [], "eval": []}
        self.added_head = False     # a fresh MLM head was put on imported weights
        self._progress: Callable = lambda ev: None

    # ---- public ---------------------------------------------------------------------------
    def run(self, progress: Callable[[dict], None] | None = None, cancel=None) -> dict:
        """Train to ``config.steps``; returns the summary (also sent as the "done" event)."""
        self._progress = progress or (lambda ev: None)
        threads = torch.get_num_threads()
        if self.config.threads > 0:
            torch.set_num_threads(self.config.threads)
        try:
            return self._run(_cancel_fn(cancel))
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
            loss, tokens = self._train_step(phase)
            self.step += 1
            win_loss += loss.detach().float()
            win_n += 1
            win_tokens += tokens
            if self.step % c.log_every == 0 or self.step == total or self._phase(self.step) != phase:
                if self.device.type == "cuda":
                    torch.cuda.synchronize(self.device)
                now = time.perf_counter()
                mean = float(win_loss) / win_n
                if not math.isfinite(mean):
                    raise EncoderscopeError(f"the loss became {mean} at step {self.step}: lower the "
                                            "learning rate (--lr) or use fp32 (--precision fp32)")
                per_step = (now - run_start_time) / max(1, self.step - run_start_step)
                ev = dict(phase=phase, loss=mean, lr=lr, tokens_per_s=win_tokens / max(now - win_start, 1e-9),
                          elapsed_s=now - started, eta_s=per_step * (total - self.step))
                self.history["train"].append({"step": self.step, "phase": phase, "loss": mean, "lr": lr})
                self._emit("step", **ev)
                win_loss.zero_()
                win_n = win_tokens = 0
                win_start = now
            if self.eval_ids and (self.step % self.eval_every == 0 or self.step == total):
                self._evaluate()
                self.model.train()
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

    # ---- setup ----------------------------------------------------------------------------
    def _setup(self) -> None:
        c = self.config
        c.validate()
        try:
            self.device = pick_device(None if c.device in ("", "auto") else c.device)
        except RuntimeError as e:
            raise InputError(str(e)) from None
        if c.precision == "auto":
            self.precision = "bf16" if bf16_supported(self.device) else "fp32"
        elif c.precision == "bf16" and not bf16_supported(self.device):
            raise InputError(f"bf16 is not supported on {describe_device(self.device)}; use --precision fp32")
        else:
            self.precision = c.precision
        out = Path(c.out).expanduser()
        recover(out)
        resume = Path(c.resume).expanduser() if c.resume else None
        if out.exists() and not out.is_dir():
            raise InputError(f"output {out} is a file, not a folder")
        if out.is_dir() and any(out.iterdir()):
            same = resume is not None and out.resolve() == resume.resolve()
            if not (out / CHECKPOINT_MARKER).is_file():
                raise InputError(f"output folder {out} is not empty and holds no Encoderscope checkpoint: "
                                 "choose a new or empty folder")
            if not same and not c.overwrite:
                raise InputError(f"output folder {out} already holds a checkpoint: choose another folder, "
                                 "resume it (--resume), or allow overwriting it")

        self._emit("status", message=f"reading {c.corpus}")
        sentences = read_corpus(c.corpus, limit=c.max_sentences or None, encoding=c.corpus_encoding or None)
        train, held = split_heldout(sentences, c.heldout, c.seed)
        saved = None
        if resume is not None:
            saved = read_trainer_state(resume)
            self._emit("status", message=f"loading checkpoint {resume}")
            self._load_model(resume)
            from transformers import AutoTokenizer
            self.tokenizer = AutoTokenizer.from_pretrained(str(resume), trust_remote_code=False)
        else:
            torch.manual_seed(c.seed)
            self._emit("status", message="building the tokenizer and the model")
            self._build_model(train)
        self._check_head()
        tok = self.tokenizer
        self.max_length = min(c.max_length, self.model.config.max_position_embeddings)
        self.special_ids = sorted(set(tok.all_special_ids) | {tok.pad_token_id})
        self._emit("status", message=f"tokenizing {len(train) + len(held):,} sentences")
        self.train_ids = [s for s in encode(tok, train, self.max_length) if len(s) > 2]
        if not self.train_ids:
            raise InputError("no training sentence has any token besides [CLS]/[SEP]")
        self.eval_ids = [s for s in encode(tok, held[:c.eval_sentences], self.max_length) if len(s) > 2]
        self._unigram()
        self.model.to(self.device)

        decay, no_decay = [], []
        for name, p in self.model.named_parameters():
            if p.requires_grad:
                (decay if p.ndim >= 2 else no_decay).append(p)
        # auto: fresh weights 5e-4; imported weights 5e-5, or 2e-4 when a new MLM head was added
        # (a random head next to a trained body needs the higher rate to catch up).
        self.peak_lr = c.lr or (5e-4 if c.init == "fresh" else 2e-4 if self.added_head else 5e-5)
        if saved and not c.lr:
            self.peak_lr = saved.get("peak_lr", self.peak_lr)
        self.opt = torch.optim.AdamW(
            [{"params": decay, "weight_decay": c.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
            lr=self.peak_lr, betas=(0.9, 0.98), eps=1e-6)
        self.mask_gen = torch.Generator().manual_seed(c.seed)
        self.sampler = BatchSampler(len(self.train_ids), c.batch_size, c.seed)
        self.eval_every = c.eval_every or max(10, c.steps // 20)
        if saved is not None:
            self._restore(resume, saved)
        self._prepare_eval()

    def _build_model(self, train: list[str]) -> None:
        c = self.config
        from transformers import AutoTokenizer
        if c.init == "fresh":
            if c.tokenizer == "word":
                from .wordtok import build_word_tokenizer
                self.tokenizer = build_word_tokenizer(train, c.vocab_size, c.min_frequency, c.max_length)
            else:
                from .sources import resolve
                self.tokenizer = AutoTokenizer.from_pretrained(str(resolve("minilm").folder),
                                                               trust_remote_code=False)
                self.tokenizer.model_max_length = c.max_length
            tok = self.tokenizer
            cfg = EncoderConfig(vocab_size=len(tok), max_position_embeddings=c.max_length, dim=c.dim,
                                n_layers=c.layers, n_heads=c.heads, hidden_dim=c.ffn, dropout=c.dropout,
                                attention_dropout=c.dropout, positions=c.positions, norm=c.norm,
                                type_vocab_size=0, pad_token_id=tok.pad_token_id or 0)
            self.model = EncoderForMaskedLM(cfg) if "mlm" in c.objective else Encoder(cfg)
            return
        if c.init == "minilm":
            from .sources import resolve
            folder = resolve("minilm").folder
        else:
            folder = Path(c.init).expanduser()
            if not folder.is_dir():
                raise InputError(f"--init {c.init!r}: use 'fresh', 'minilm' or a model folder")
        try:
            self._load_model(folder)
        except ModelUnavailable as e:
            raise InputError(f"cannot start from {folder}: {e}") from None
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), trust_remote_code=False)
        if self.tokenizer.mask_token_id is None and "mlm" in c.objective:
            raise InputError(f"the tokenizer of {folder} has no [MASK] token: it cannot be trained with MLM")

    def _load_model(self, folder: Path) -> None:
        model, cfg, _ = load_folder(Path(folder))
        self.added_head = isinstance(model, Encoder) and "mlm" in self.config.objective
        if self.added_head:
            # A body without a masked-LM head (minilm): add a fresh head, tied to its embeddings.
            wrapped = EncoderForMaskedLM(cfg)
            wrapped.distilbert = model
            wrapped.tie_weights()
            model = wrapped
        self.model = model

    def _check_head(self) -> None:
        self.has_mlm = isinstance(self.model, EncoderForMaskedLM)
        self.body = self.model.distilbert if self.has_mlm else self.model
        tok = self.tokenizer
        if tok.pad_token_id is None or tok.cls_token_id is None:
            raise InputError("the tokenizer has no [PAD]/[CLS] token")
        if len(tok) > self.model.config.vocab_size:
            raise InputError(f"the tokenizer has {len(tok)} tokens but the model only {self.model.config.vocab_size}")
        mc = self.model.config
        if "simcse" in self.config.objective and not (mc.dropout > 0 or mc.attention_dropout > 0):
            raise InputError("contrastive (SimCSE) training needs dropout > 0, and this model's "
                             "dropout is 0: the two dropout views of a sentence are its positive pair")

    def _unigram(self) -> None:
        """Token frequencies of the training part: the baseline a model must beat, and the pool
        the 10% "random token" replacements draw from."""
        V = self.model.config.vocab_size
        counts = np.bincount(np.concatenate(self.train_ids), minlength=V).astype(np.float64)
        counts[self.special_ids] = 0
        seen = np.flatnonzero(counts)
        self.random_ids = torch.from_numpy(seen if len(seen) else np.arange(V))
        ordinary = np.ones(V, bool)
        ordinary[self.special_ids] = False
        # Good-Turing style: tokens never seen in training share the probability mass of the
        # tokens seen once (n1 / N); seen tokens keep their frequencies, scaled to make room.
        # (Add-one smoothing would hand most of the mass to a 30k vocabulary's unseen pieces.)
        N = counts.sum()
        unseen = ordinary & (counts == 0)
        probs = counts / max(N, 1.0)
        if unseen.any() and N > 0:
            mass = max(1.0, float((counts == 1).sum())) / N
            probs = probs * (1.0 - mass)
            probs[unseen] = mass / unseen.sum()
        self.unigram_logp = np.log(probs, where=probs > 0, out=np.full(V, -np.inf))
        self.unigram_top = int(np.argmax(counts))

    def _prepare_eval(self) -> None:
        """Fixed held-out batches: the same masks at every evaluation, so the numbers compare.

        A small held-out part is masked several times over (different positions each time, up
        to MLM_EVAL_REPEATS copies) until about MLM_EVAL_TARGETS tokens are scored: 29 held-out
        sentences give ~26 masked tokens once, too few for an accuracy worth reading.
        """
        c = self.config
        self.embed_batches, self.eval_batches = [], []
        gen = torch.Generator().manual_seed(c.seed + 1)
        bs = max(c.batch_size, 64)
        n_tokens = sum(len(s) - 2 for s in self.eval_ids)
        repeats = int(min(MLM_EVAL_REPEATS, max(1, math.ceil(MLM_EVAL_TARGETS / max(1.0, c.mask_prob * n_tokens)))))
        for r in range(repeats):
            for i in range(0, len(self.eval_ids), bs):
                ids, attn = collate(self.eval_ids[i:i + bs], self.tokenizer.pad_token_id)
                if r == 0:
                    self.embed_batches.append((ids, attn))
                special = special_mask(ids, self.special_ids)
                inputs, labels = mask_tokens(ids, special, self.tokenizer.mask_token_id or 0,
                                             self.model.config.vocab_size, c.mask_prob, gen, self.random_ids)
                self.eval_batches.append((ids, attn, inputs, labels))
        self.pairs = _read_pairs(c.pairs) if c.pairs else []

    # ---- the schedule ---------------------------------------------------------------------
    def _phase_bounds(self) -> list[tuple[str, int, int]]:
        c = self.config
        if c.objective == "mlm+simcse":
            k = min(c.steps - 1, max(1, round(c.steps * c.mlm_fraction))) if c.steps > 1 else c.steps
            return [("mlm", 0, k), ("simcse", k, c.steps)]
        return [(c.objective, 0, c.steps)]

    def _phase(self, step: int) -> str:
        for name, a, b in self._phase_bounds():
            if step < b:
                return name
        return self._phase_bounds()[-1][0]

    def _lr(self, step: int) -> float:
        """Linear warm-up to the peak, then linear decay to 0, within each phase."""
        bounds = self._phase_bounds()
        _, a, b = next((p for p in bounds if step < p[2]), bounds[-1])
        t, n = step - a, b - a
        w = self.config.warmup
        warm = min(n, max(1, int(w) if w >= 1 else round(w * n)))
        if t < warm:
            return self.peak_lr * (t + 1) / warm
        return self.peak_lr * max(0.0, (n - t) / max(1, n - warm))

    # ---- one step -------------------------------------------------------------------------
    def _autocast(self):
        if self.precision == "bf16":
            return torch.autocast(device_type=self.device.type, dtype=torch.bfloat16)
        return torch.autocast(device_type=self.device.type, enabled=False)

    def _mlm_loss(self, inputs, attn, labels, reduction="mean"):
        out = self.body(inputs, attn)
        sel = labels != IGNORE
        logits = self.model.head(out.last_hidden_state[sel])          # only the picked positions
        return F.cross_entropy(logits.float(), labels[sel], reduction=reduction), logits

    def _embed(self, ids, attn):
        h = self.body(ids, attn).last_hidden_state
        return l2_normalize(pool(h.float(), attn, "mean"))

    def _simcse_loss(self, ids, attn):
        """The same sentences twice through dropout: each one's second view is its positive,
        the other sentences of the batch are its negatives."""
        B = ids.shape[0]
        z = self._embed(torch.cat([ids, ids]), torch.cat([attn, attn]))
        sim = z[:B] @ z[B:].T / self.config.temperature                 # (B, B) cosine / tau
        return F.cross_entropy(sim, torch.arange(B, device=sim.device))

    def _train_step(self, phase: str):
        c = self.config
        idx = self.sampler.next()
        ids, attn = collate([self.train_ids[i] for i in idx], self.tokenizer.pad_token_id)
        n_tokens = int(attn.sum())                 # counted on the CPU: no GPU sync per step
        if phase == "mlm":
            special = special_mask(ids, self.special_ids)
            inputs, labels = mask_tokens(ids, special, self.tokenizer.mask_token_id,
                                         self.model.config.vocab_size, c.mask_prob, self.mask_gen, self.random_ids)
            inputs, attn, labels = (t.to(self.device, non_blocking=True) for t in (inputs, attn, labels))
            with self._autocast():
                loss, _ = self._mlm_loss(inputs, attn, labels)
            tokens = n_tokens
        else:
            ids, attn = ids.to(self.device), attn.to(self.device)
            with self._autocast():
                loss = self._simcse_loss(ids, attn)
            tokens = 2 * n_tokens
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if c.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), c.grad_clip)
        self.opt.step()
        return loss, tokens

    # ---- evaluation -----------------------------------------------------------------------
    @torch.no_grad()
    def evaluate(self) -> dict:
        """Held-out metrics now (None where they do not apply)."""
        m: dict = dict.fromkeys(("heldout_mlm_loss", "heldout_mlm_accuracy", "unigram_loss",
                                 "unigram_accuracy", "heldout_simcse_loss", "alignment",
                                 "uniformity", "pair_cosine", "unrelated_cosine"))
        self.model.eval()
        if self.has_mlm and self.eval_batches:
            total = correct = 0
            loss_sum = uni_loss = uni_correct = 0.0
            for _, attn, inputs, labels in self.eval_batches:
                sel = labels != IGNORE
                gold = labels[sel].numpy()
                uni_loss += float(-self.unigram_logp[gold].sum())
                uni_correct += float((gold == self.unigram_top).sum())
                with self._autocast():
                    loss, logits = self._mlm_loss(inputs.to(self.device), attn.to(self.device),
                                                  labels.to(self.device), reduction="sum")
                loss_sum += float(loss)
                correct += int((logits.argmax(-1).cpu() == labels[sel]).sum())
                total += int(sel.sum())
            m.update(heldout_mlm_loss=loss_sum / max(total, 1), heldout_mlm_accuracy=correct / max(total, 1),
                     unigram_loss=uni_loss / max(total, 1), unigram_accuracy=uni_correct / max(total, 1))
        if "simcse" in self.config.objective and self.embed_batches:
            z = torch.cat([self._embed_eval(ids, attn) for ids, attn in self.embed_batches])
            if len(z) > 1:
                d2 = torch.cdist(z, z).pow(2)
                iu = torch.triu_indices(len(z), len(z), 1)
                m["uniformity"] = float(torch.log(torch.exp(-2 * d2[iu[0], iu[1]]).mean()))
            # Two dropout views of each held-out sentence: alignment and the held-out SimCSE loss,
            # with a fixed seed (forked, so training's random stream is untouched).
            with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
                torch.manual_seed(self.config.seed + 2)
                self.model.train()
                align, sims, n = 0.0, 0.0, 0
                for ids, attn in self.embed_batches:
                    ids, attn = ids.to(self.device), attn.to(self.device)
                    with self._autocast():
                        z1, z2 = self._embed(ids, attn), self._embed(ids, attn)
                    sim = z1 @ z2.T / self.config.temperature
                    sims += float(F.cross_entropy(sim, torch.arange(len(ids), device=sim.device))) * len(ids)
                    align += float((z1 - z2).pow(2).sum(-1).sum())
                    n += len(ids)
                self.model.eval()
            m["alignment"] = align / n
            m["heldout_simcse_loss"] = sims / n
        if self.pairs:
            m.update(self.pair_scores())
        return m

    def _embed_eval(self, ids, attn):
        with self._autocast():
            return self._embed(ids.to(self.device), attn.to(self.device)).float().cpu()

    @torch.no_grad()
    def pair_scores(self) -> dict:
        """Mean cosine of the paraphrase pairs vs. of unrelated pairs (a with another topic's b)."""
        was = self.model.training
        self.model.eval()
        a = self._embed_texts([p[0] for p in self.pairs])
        b = self._embed_texts([p[1] for p in self.pairs])
        pos = float((a * b).sum(-1).mean())
        others = _unrelated(self.pairs)
        neg = float((a * b[others]).sum(-1).mean())
        self.model.train(was)
        return {"pair_cosine": pos, "unrelated_cosine": neg}

    def _embed_texts(self, texts: list[str]) -> torch.Tensor:
        seqs = encode(self.tokenizer, texts, self.max_length)
        out = []
        for i in range(0, len(seqs), 64):
            out.append(self._embed_eval(*collate(seqs[i:i + 64], self.tokenizer.pad_token_id)))
        return torch.cat(out)

    def _evaluate(self) -> dict:
        m = self.evaluate()
        phase = self._phase(max(self.step - 1, 0))
        m["heldout_loss"] = m["heldout_simcse_loss"] if phase == "simcse" else m["heldout_mlm_loss"]
        m["phase"] = phase
        self.history["eval"].append({"step": self.step, **m})
        self._emit("eval", **m)
        return m

    # ---- checkpoints ----------------------------------------------------------------------
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
            tensors, groups = _optimizer_tensors(self.opt)
            tensors["rng.torch"] = torch.get_rng_state()
            tensors["rng.mask"] = self.mask_gen.get_state()
            if self.device.type == "cuda":
                tensors["rng.cuda"] = torch.cuda.get_rng_state(self.device)
            save_file(tensors, str(folder / STATE_TENSORS))
            state = {"version": STATE_VERSION, "step": self.step, "config": c.to_dict(),
                     "peak_lr": self.peak_lr, "sampler": self.sampler.state(),
                     "param_groups": groups, "history": self.history, "precision": self.precision}
            (folder / STATE_JSON).write_text(json.dumps(state), encoding="utf-8")

        out = atomic_folder(Path(c.out).expanduser(), write)
        self._emit("checkpoint", path=str(out))
        return out

    def _restore(self, folder: Path, saved: dict) -> None:
        if saved.get("version") != STATE_VERSION:
            raise InputError(f"{folder}: training state version {saved.get('version')} is not supported")
        tensors = load_file(str(folder / STATE_TENSORS))
        state = _optimizer_state(tensors, saved["param_groups"])
        try:
            self.opt.load_state_dict(state)
        except (ValueError, KeyError) as e:
            raise InputError(f"the optimizer state in {folder} does not fit the model: {e}") from None
        for st in self.opt.state.values():         # moments live where the parameters do
            for k, v in st.items():
                if torch.is_tensor(v) and k != "step":
                    st[k] = v.to(self.device)
        torch.set_rng_state(tensors["rng.torch"])
        self.mask_gen.set_state(tensors["rng.mask"])
        if self.device.type == "cuda" and "rng.cuda" in tensors:
            torch.cuda.set_rng_state(tensors["rng.cuda"], self.device)
        self.step = int(saved["step"])
        s = saved.get("sampler", {})
        self.sampler = BatchSampler(len(self.train_ids), self.config.batch_size, self.config.seed,
                                    int(s.get("epoch", 0)), min(int(s.get("position", 0)), len(self.train_ids)))
        self.history = saved.get("history") or {"train": [], "eval": []}

    # ---- reporting ------------------------------------------------------------------------
    def _emit(self, kind: str, **data) -> None:
        self._progress({"kind": kind, "step": self.step, "total": self.config.steps, **data})

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


# ---------------------------------------------------------------------------------------------


def _cancel_fn(cancel) -> Callable[[], bool]:
    if cancel is None:
        return lambda: False
    if hasattr(cancel, "is_set"):
        return cancel.is_set
    return cancel


def _read_pairs(path: str) -> list[tuple[str, str, str]]:
    import csv
    p = Path(path).expanduser()
    if not p.is_file():
        raise InputError(f"pairs file {path!r} does not exist")
    raw = p.read_text(encoding="utf-8-sig").splitlines()
    delim = "\t" if p.suffix.lower() == ".tsv" or (raw and "\t" in raw[0]) else ","
    rows = list(csv.DictReader(raw, delimiter=delim))
    if not rows or not {"a", "b"} <= set(rows[0]):
        raise InputError(f"{path}: expected columns a, b (and optionally topic)")
    pairs = [(r["a"].strip(), r["b"].strip(), (r.get("topic") or "").strip()) for r in rows
             if (r.get("a") or "").strip() and (r.get("b") or "").strip()]
    if len(pairs) < 2:
        raise InputError(f"{path}: at least two pairs are needed")
    return pairs


def _unrelated(pairs) -> torch.Tensor:
    """For pair i, the index of a pair with another topic (the next such one, cyclically);
    without topics, the pair half-way round the list."""
    n = len(pairs)
    out = []
    for i, (_, _, topic) in enumerate(pairs):
        j = (i + n // 2) % n
        if topic:
            for k in range(n):
                cand = (i + n // 2 + k) % n
                if pairs[cand][2] != topic:
                    j = cand
                    break
        out.append(j if j != i else (i + 1) % n)
    return torch.tensor(out)
