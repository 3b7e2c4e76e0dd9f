"""The trainer's setup: device and precision, the output folder, the corpus split and tokenized,
the model built fresh, imported or resumed (with an MLM head where the objective needs one),
the unigram baseline, the optimizer and the fixed held-out batches."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import torch

from core.device import bf16_native, bf16_supported, describe_device, pick_device
from core.encoder.model import Encoder, EncoderConfig, EncoderForMaskedLM
from core.encoder.sources import CHECKPOINT_MARKER, DEFAULT_MODEL
from core.encoder.transformers_import import from_transformers
from core.encoder.weights import load_folder
from core.errors import InputError, ModelUnavailable, settings_fix
from core.evaluate.pairs import read_scored_pairs
from core.train import run_folder
from core.train.checkpoint import read_trainer_state, recover
from core.train.config import uses_lm_head
from core.train.data import BatchSampler, collate, encode, split_heldout
from core.train.evaluation import Evaluator, HeldOut, read_pairs
from core.train.masking import mask_tokens, special_mask
from core.train.next_token import next_token_labels
from core.train.watch import GradFlow, Probe, probe_every

MLM_EVAL_TARGETS = 2000   # aim to score about this many masked held-out tokens per evaluation
MLM_EVAL_REPEATS = 10     # ... masking the held-out sentences at most this many times over


class TrainerSetup:
    """What Trainer._setup does before the first step (a part of Trainer)."""

    def _setup(self) -> None:
        c = self.config
        c.validate()
        try:
            self.device = pick_device(None if c.device in ("", "auto") else c.device)
        except RuntimeError as e:
            raise InputError(str(e)) from None
        if c.precision == "auto":
            self.precision = "bf16" if bf16_native(self.device) else "fp32"
        elif c.precision == "bf16" and not bf16_supported(self.device):
            raise InputError(f"bf16 is not supported on {describe_device(self.device)}; use fp32",
                             fix=settings_fix(precision="fp32"))
        else:
            self.precision = c.precision
        out = Path(c.out).expanduser()
        recover(out)
        resume = Path(c.resume).expanduser() if c.resume else None
        if out.exists() and not out.is_dir():
            raise InputError(f"output {out} is a file, not a folder")
        if out.is_dir() and any(out.iterdir()):
            same = resume is not None and out.resolve() == resume.resolve()
            if not (out / CHECKPOINT_MARKER).is_file() and not run_folder.only_watch_files(out):
                raise InputError(f"output folder {out} is not empty and holds no Encoderscope checkpoint: "
                                 "choose a new or empty folder")
            if not same and not c.overwrite and (out / CHECKPOINT_MARKER).is_file():
                raise InputError(f"output folder {out} already holds a checkpoint: choose another folder, "
                                 "resume it, or allow overwriting it", fix=settings_fix(out=None, resume=None,
                                                                                     overwrite=None))

        saved = read_trainer_state(resume) if resume is not None else None
        self.metrics = run_folder.start_run(out, resume, saved["step"] if saved else 0)
        self._emit("status", message=f"reading {c.corpus}")
        sentences = self.read_corpus(c.corpus, limit=c.max_sentences or None, encoding=c.corpus_encoding or None)
        train, held = split_heldout(sentences, c.heldout, c.seed)
        if resume is not None:
            self._emit("status", message=f"loading checkpoint {resume}")
            self._load_model(resume)
            self.tokenizer = _folder_tokenizer(resume, "cannot resume from")
        else:
            torch.manual_seed(c.seed)
            self._emit("status", message="building the tokenizer and the model")
            self._build_model(train)
        self._apply_model_settings()
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
        for _name, p in self.model.named_parameters():
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
        if c.watch:
            self.grad_flow = GradFlow(self.model.named_parameters())
            self.probe = Probe(self, out)
            self.probe_every = probe_every(c)

    def _build_model(self, train: list[str]) -> None:
        c = self.config
        AutoTokenizer = from_transformers("AutoTokenizer")
        if c.init == "fresh":
            if c.tokenizer == "word":
                from core.encoder.wordtok import build_word_tokenizer
                self.tokenizer = build_word_tokenizer(train, c.vocab_size, c.min_frequency, c.max_length)
            else:
                from core.encoder.sources import resolve
                self.tokenizer = AutoTokenizer.from_pretrained(str(resolve(DEFAULT_MODEL).folder),
                                                               trust_remote_code=False)
                self.tokenizer.model_max_length = c.max_length
            tok = self.tokenizer
            cfg = EncoderConfig(vocab_size=len(tok), max_position_embeddings=c.max_length, dim=c.dim,
                                n_layers=c.layers, n_heads=c.heads, hidden_dim=c.ffn, dropout=c.dropout,
                                attention_dropout=c.dropout, positions=c.positions, norm=c.norm,
                                type_vocab_size=0, pad_token_id=tok.pad_token_id or 0,
                                attention=c.attention, pooling=c.pooling)
            self.model = EncoderForMaskedLM(cfg) if uses_lm_head(c.objective) else Encoder(cfg)
            return
        if c.init == DEFAULT_MODEL:
            from core.encoder.sources import resolve
            folder = resolve(DEFAULT_MODEL).folder
        else:
            folder = Path(c.init).expanduser()
            if not folder.is_dir():
                raise InputError(f"the initial weights {c.init!r} are not a model folder: start from 'fresh', "
                                 "'minilm' or a model folder", fix=settings_fix(init=None))
        try:
            self._load_model(folder)
        except ModelUnavailable as e:
            raise InputError(f"cannot start from {folder}: {e}") from None
        self.tokenizer = _folder_tokenizer(folder, "cannot start from")
        if self.tokenizer.mask_token_id is None and "mlm" in c.objective:
            raise InputError(f"the tokenizer of {folder} has no [MASK] token: it cannot be trained with MLM")

    def _load_model(self, folder: Path) -> None:
        model, cfg, _ = load_folder(Path(folder))
        self.added_head = isinstance(model, Encoder) and uses_lm_head(self.config.objective)
        if self.added_head:
            # A body without a masked-LM head (minilm): add a fresh head, tied to its embeddings.
            wrapped = EncoderForMaskedLM(cfg)
            wrapped.distilbert = model
            wrapped.tie_weights()
            model = wrapped
        self.model = model

    def _apply_model_settings(self) -> None:
        """The run's attention mask and pooling become the model's (saved with it): a model
        started from other weights is trained, and later embeds, the way this run asks."""
        body = self.model.distilbert if isinstance(self.model, EncoderForMaskedLM) else self.model
        body.config.attention = self.config.attention
        body.set_pooling(self.config.pooling)

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
        if c.objective == "clm":
            repeats = 1                   # next-token targets are the same every time: score each once
        for r in range(repeats):
            for i in range(0, len(self.eval_ids), bs):
                ids, attn = collate(self.eval_ids[i:i + bs], self.tokenizer.pad_token_id)
                if r == 0:
                    self.embed_batches.append((ids, attn))
                special = special_mask(ids, self.special_ids)
                if c.objective == "clm":
                    inputs, labels = ids, next_token_labels(ids, attn, special)
                else:
                    inputs, labels = mask_tokens(ids, special, self.tokenizer.mask_token_id or 0,
                                                 self.model.config.vocab_size, c.mask_prob, gen, self.random_ids)
                self.eval_batches.append((ids, attn, inputs, labels))
        self.evaluator = Evaluator(self, HeldOut(self.eval_batches, self.embed_batches, self.unigram_logp,
                                                 self.unigram_top, read_pairs(c.pairs) if c.pairs else [],
                                                 _scored_pairs(c.eval_pairs)),
                                   c, self.tokenizer, self.max_length)


def _folder_tokenizer(folder: Path, doing: str):
    """The tokenizer saved beside a model's weights; InputError naming what is missing."""
    from core.encoder.tokenizer import load_tokenizer
    try:
        return load_tokenizer(Path(folder))
    except ModelUnavailable as e:
        raise InputError(f"{doing} {folder}: {e}") from None


def _scored_pairs(path: str):
    """The graded pairs to rank at each evaluation, or None."""
    if not path:
        return None
    return read_scored_pairs(path, remedy="give the header row a, b, score (or sentence1, sentence2, similarity)")
