"""What a training run is asked to do: every option of `encoderscope train` and the Train panel.

No torch here: the CLI builds its flags (and the app its form) from these defaults at start-up.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path

from core.errors import InputError, settings_fix
from core.names import ATTENTIONS, POOLINGS

OBJECTIVES = ("mlm", "simcse", "mlm+simcse", "clm")
LM_HEAD_OBJECTIVES = ("mlm", "mlm+simcse", "clm")   # the objectives that train the LM head


def uses_lm_head(objective: str) -> bool:
    """True when the objective predicts tokens through the (masked-)LM head: mlm and clm."""
    return objective in LM_HEAD_OBJECTIVES


@dataclass
class TrainConfig:
    corpus: str = ""               # training text: a .txt/.csv/.tsv/.jsonl file or a store folder
    corpus_encoding: str = ""      # the corpus file's text encoding if not UTF-8 ("" = UTF-8 or its byte-order mark)
    out: str = ""                  # output folder; it becomes a model folder (--model OUT)
    objective: str = "mlm"         # "mlm" | "simcse" | "mlm+simcse" (MLM, then contrastive) | "clm" (next token)
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
    lr: float = 0.0                # peak learning rate; 0 = auto (5e-4 fresh, 5e-5 imported, 2e-4 + new MLM head)
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
    precision: str = "auto"        # "auto" (bf16 autocast where the hardware has it natively) | "fp32" | "bf16"
    threads: int = 0               # CPU threads for this run (0 = torch's default); 1 is fastest for tiny models
    resume: str = ""               # a checkpoint folder: continue its run (weights, optimizer, RNG, data)
    pairs: str = ""                # optional .tsv/.csv with columns a, b (, topic): paraphrase pairs to evaluate
    max_sentences: int = 0         # read at most this many corpus sentences (0 = all)
    overwrite: bool = False        # allow replacing a checkpoint already in `out` (other than the one resumed)
    watch: bool = True             # gradient flow every log step and probes every probe_every steps
    probe_every: int = 0           # probe the model every N steps; 0 = auto (about 30 probes, at least 25 steps apart)
    probe_sentence: str = ""       # its attention is kept for every layer x head ("" = the first held-out sentence)
    probe_set: tuple = ()          # sentences whose cosine matrix is kept at each probe (empty = shipped pairs)
    attention: str = "bidirectional"   # "bidirectional" | "causal" (a token sees itself and earlier ones; clm needs it)
    pooling: str = "mean"          # SimCSE's sentence vector, the model's default: "cls" | "mean" | "max" | "attention"
    eval_pairs: str = ""           # scored pairs (.tsv/.csv: two sentences, a 0-5 score): Spearman at each evaluation

# Twin of core.encoder.model.EncoderConfig.__post_init__, alike: the same architecture
#   names checked for people (InputError, before any model is built) where the model checks
#   them for code (ValueError); the training settings add their own.
    def validate(self) -> None:
        if self.objective not in OBJECTIVES:
            raise InputError(f"objective must be one of {', '.join(OBJECTIVES)}, not {self.objective!r}")
        if self.tokenizer not in ("word", "wordpiece"):
            raise InputError(f"tokenizer must be 'word' or 'wordpiece', not {self.tokenizer!r}")
        if self.positions not in ("learned", "sinusoidal"):
            raise InputError(f"positions must be 'learned' or 'sinusoidal', not {self.positions!r}")
        if self.norm not in ("pre", "post"):
            raise InputError(f"norm must be 'pre' or 'post', not {self.norm!r}")
        if self.attention not in ATTENTIONS:
            raise InputError(f"attention must be {' or '.join(ATTENTIONS)}, not {self.attention!r}")
        if self.pooling not in POOLINGS:
            raise InputError(f"pooling must be one of {', '.join(POOLINGS)}, not {self.pooling!r}")
        if self.objective == "clm" and self.attention != "causal":
            raise InputError("the clm objective (next-token prediction) needs a causal attention mask: with "
                             "bidirectional attention every token sees the token it must predict; use "
                             "causal attention", fix=settings_fix(attention="causal"))
        if self.pooling == "attention" and "simcse" not in self.objective:
            raise InputError("attention pooling learns its query vector from the contrastive objective: "
                             "use the simcse or mlm+simcse objective with attention pooling",
                             fix=settings_fix(objective="simcse", pooling="attention"))
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
                     "checkpoint_every", "threads", "max_sentences", "probe_every"):
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
                                 "views of a sentence are its positive pair (e.g. a dropout of 0.1)",
                                 fix=settings_fix(dropout="0.1"))
        if not self.corpus:
            raise InputError("no corpus given: a .txt/.csv/.jsonl file or a store folder")
        if not self.out:
            raise InputError("no output folder given")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def from_checkpoint(cls, folder: str | Path, **changes) -> TrainConfig:
        """The configuration a checkpoint was trained with, plus ``changes``, set to resume it.
        ``out`` defaults to the checkpoint folder itself."""
        from core.train.checkpoint import read_trainer_state
        folder = Path(folder).expanduser()
        state = read_trainer_state(folder)
        cfg = cls.from_dict(state["config"])
        changes = {k: v for k, v in changes.items() if v is not None}
        changes.setdefault("out", str(folder))
        return replace(cfg, resume=str(folder), **changes)
