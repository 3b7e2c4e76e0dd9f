"""A transformer encoder written out by hand, one small class per concept.

Read top to bottom: config -> embeddings -> attention -> FFN -> block -> stack -> MLM head.
Module and parameter names follow Hugging Face DistilBERT (``q_lin``, ``sa_layer_norm``,
``ffn.lin1`` ...) so a DistilBERT ``state_dict`` loads with ``strict=True`` as it is.

Shapes: B = batch, T = tokens, D = model dim, H = heads, Dh = D // H, V = vocab.

``Linear`` is nn.Linear with a CPU inference fast path (core/encoder/kernels.py); read it as nn.Linear.
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, fields

import torch
import torch.nn.functional as F
from torch import nn

from core.encoder.kernels import Linear, at_least_fp32, explicit_attention_is_faster, key_padding, pad_keys, sdpa_mask
from core.names import ATTENTIONS, POOLINGS


@dataclass
class EncoderConfig:
    vocab_size: int = 30522            # number of token ids the embedding table holds
    max_position_embeddings: int = 512  # longest sequence (tokens, specials included)
    dim: int = 768                     # model (hidden) width D
    n_layers: int = 6                  # number of encoder blocks
    n_heads: int = 12                  # attention heads per block; D must divide by it
    hidden_dim: int = 3072             # inner width of the position-wise FFN
    dropout: float = 0.1               # dropout on embeddings, sublayer outputs and FFN
    attention_dropout: float = 0.1     # dropout on the attention weights
    activation: str = "gelu"           # "gelu" (exact, erf) or "gelu_tanh" (tanh approximation)
    positions: str = "learned"         # "learned" position table or fixed "sinusoidal" encodings
    type_vocab_size: int = 0           # token-type (segment) ids; 0 = no token-type embeddings (DistilBERT)
    norm: str = "post"                 # "post": x = LN(x + f(x)) as BERT; "pre": x = x + f(LN(x))
    layer_norm_eps: float = 1e-12      # epsilon inside every LayerNorm
    pad_token_id: int = 0              # id of [PAD]; its embedding row starts at zero
    initializer_range: float = 0.02    # std of the normal init for fresh weights
    attention: str = "bidirectional"   # "bidirectional" (every token sees all) or "causal" (itself and earlier only)
    pooling: str = "mean"              # the pooling the model was trained for; "attention" adds a learned query

    def __post_init__(self):
        if self.dim % self.n_heads:
            raise ValueError(f"dim {self.dim} is not divisible by n_heads {self.n_heads}")
        if self.activation not in ("gelu", "gelu_tanh"):
            raise ValueError(f"activation must be 'gelu' or 'gelu_tanh', not {self.activation!r}")
        if self.positions not in ("learned", "sinusoidal"):
            raise ValueError(f"positions must be 'learned' or 'sinusoidal', not {self.positions!r}")
        if self.norm not in ("post", "pre"):
            raise ValueError(f"norm must be 'post' or 'pre', not {self.norm!r}")
        if self.attention not in ATTENTIONS:
            raise ValueError(f"attention must be 'bidirectional' or 'causal', not {self.attention!r}")
        if self.pooling not in POOLINGS:
            raise ValueError(f"pooling must be one of {', '.join(POOLINGS)}, not {self.pooling!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> EncoderConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})


@dataclass
class EncoderOutput:
    last_hidden_state: torch.Tensor                 # (B, T, D)
    hidden_states: tuple | None = None           # n_layers + 1 tensors (B, T, D): embeddings, then each block
    attentions: tuple | None = None              # n_layers tensors (B, H, T, T)


def sinusoidal_table(n_positions: int, dim: int) -> torch.Tensor:
    """PE[p, 2i] = sin(p / 10000^(2i/D)), PE[p, 2i+1] = cos(p / 10000^(2i/D))."""
    pos = torch.arange(n_positions, dtype=torch.float64)[:, None]          # (P, 1)
    two_i = torch.arange(0, dim, 2, dtype=torch.float64)[None, :]          # (1, D/2)
    angle = pos / torch.pow(10000.0, two_i / dim)                          # (P, D/2)
    table = torch.zeros(n_positions, dim, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : dim // 2])
    return table.float()


def additive_mask(attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(B, T) of 1 = token, 0 = padding  ->  (B, 1, 1, T) of 0 or the most negative float.

    Adding it to the scores before softmax gives padded keys a weight of exactly 0.
    """
    keep = attention_mask[:, None, None, :].to(dtype)
    return (1.0 - keep) * torch.finfo(dtype).min


def causal_additive_mask(T: int, dtype: torch.dtype, device=None) -> torch.Tensor:
    """(1, 1, T, T): 0 where key j <= query i, the most negative float above the diagonal.

    Added to the scores, it leaves each token only itself and the tokens before it to attend to."""
    later = torch.ones(T, T, dtype=torch.bool, device=device).triu(1)
    return torch.zeros(T, T, dtype=dtype, device=device).masked_fill(later, torch.finfo(dtype).min)[None, None]


def attention_bias(attention_mask: torch.Tensor | None, T: int, dtype: torch.dtype, device,
                   causal: bool) -> torch.Tensor | None:
    """The additive mask the attention adds to its scores: padding (B, 1, 1, T), with ``causal``
    also the triangle (B or 1, 1, T, T); None when nothing is masked.

    Combined by the minimum, not the sum: two most-negative floats would add up to -inf."""
    pad = additive_mask(attention_mask, dtype) if needs_mask(attention_mask) else None
    if not causal:
        return pad
    tri = causal_additive_mask(T, dtype, device)
    return tri if pad is None else torch.minimum(pad, tri)


def needs_mask(attention_mask: torch.Tensor | None) -> bool:
    """False for a batch without padding (one sentence, or all of one length): adding zeros
    changes nothing, and attention without a mask runs a faster kernel. While torch.export or
    torch.compile traces the model the answer must not depend on the data (the ONNX export of
    bench/encoder_throughput.py failed on it), so there the mask is always kept. Off the CPU
    too: reading the mask would make the host wait for every kernel queued before it, once a
    batch (Backend.embed passes no mask for a batch it knows has no padding)."""
    if attention_mask is None:
        return False
    if torch.compiler.is_exporting() or torch.compiler.is_compiling() or not attention_mask.is_cpu:
        return True
    return not bool(attention_mask.all())


class Embeddings(nn.Module):
    """token embedding + position (+ token type) -> LayerNorm -> dropout."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim, padding_idx=cfg.pad_token_id)
        self.position_embeddings = nn.Embedding(cfg.max_position_embeddings, cfg.dim)
        if cfg.positions == "sinusoidal":
            # Fixed, not learned: kept as a frozen table so the state_dict matches DistilBERT's.
            with torch.no_grad():
                self.position_embeddings.weight.copy_(sinusoidal_table(cfg.max_position_embeddings, cfg.dim))
            self.position_embeddings.weight.requires_grad_(False)
        self.token_type_embeddings = (
            nn.Embedding(cfg.type_vocab_size, cfg.dim) if cfg.type_vocab_size else None
        )
        self.LayerNorm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    @property
    def word_table(self) -> torch.Tensor:
        """The word-embedding table (V, D), one row per token id."""
        return self.word_embeddings.weight

    @property
    def position_table(self) -> torch.Tensor:
        """The position table (P, D): learned rows, or the fixed sin/cos encodings."""
        return self.position_embeddings.weight

    def words(self, input_ids):
        """The word vectors (B, T, D) of the ids: the rows of the embedding table, before positions."""
        return self.word_embeddings(input_ids)

    def positions(self, n_tokens: int, device):
        """The position vectors (1, T, D) of positions 0 .. T-1."""
        return self.position_embeddings(torch.arange(n_tokens, device=device)[None, :])

    def from_words(self, words, token_type_ids=None):
        """The embeddings' output for given word vectors (B, T, D): + positions (+ token types),
        LayerNorm, dropout. What attributions and causal tracing feed their own word vectors to."""
        x = words + self.positions(words.shape[1], words.device)            # (B, T, D)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros(words.shape[:2], dtype=torch.long, device=words.device)
            x = x + self.token_type_embeddings(token_type_ids)
        return self.dropout(self.LayerNorm(x))

    def forward(self, input_ids, token_type_ids=None):
        return self.from_words(self.words(input_ids), token_type_ids)


class MultiHeadSelfAttention(nn.Module):
    """Q, K, V projections -> split heads -> softmax(QK^T / sqrt(Dh) + mask) V -> merge -> out_lin."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.n_heads = cfg.n_heads
        self.q_lin = Linear(cfg.dim, cfg.dim)
        self.k_lin = Linear(cfg.dim, cfg.dim)
        self.v_lin = Linear(cfg.dim, cfg.dim)
        self.out_lin = Linear(cfg.dim, cfg.dim)
        self.attention_dropout = cfg.attention_dropout
        self.dropout = nn.Dropout(cfg.attention_dropout)

    def split_heads(self, x):                                   # (B, T, D) -> (B, H, T, Dh)
        B, T, D = x.shape
        return x.view(B, T, self.n_heads, D // self.n_heads).transpose(1, 2)

    fused_qkv = None       # CPU inference: q/k/v weights as one (3D x D) Linear (pack_for_cpu_inference)

    def project_qkv(self, x):
        """(Q, K, V) = x W_Q, x W_K, x W_V. Packed for CPU inference, one GEMM of the three
        weights stacked does it faster (same numbers to ~1e-6): 1.5-1.65x at 4-10 tokens, 1.2x
        at 24, 1.05x from 64 on (2 threads). Hooks on the three projections
        (core/walkthrough/capture.py reads them) get the three projections."""
        fused = self.fused_qkv
        if (fused is not None and x.is_cpu and x.dtype == torch.float32 and not torch.is_grad_enabled()
                and fused.source_versions == self._qkv_versions()
                and not any(m._forward_hooks for m in (self.q_lin, self.k_lin, self.v_lin))):
            return fused(x).split(x.shape[-1], dim=-1)
        return self.q_lin(x), self.k_lin(x), self.v_lin(x)

    def _qkv_versions(self) -> tuple:
        return tuple(m.param_versions() for m in (self.q_lin, self.k_lin, self.v_lin))

    def attend(self, q, k, v, mask, need_weights: bool = False):
        """softmax(Q K^T / sqrt(Dh) + mask) V for every head at once: the context (B, H, T, Dh),
        and the weights (B, H, T, T) when asked for, else None.

        q, k, v: (B, H, T, Dh); mask: (B, 1, 1, T) or, causal, (B or 1, 1, T, T), additive (0 or the
        most negative float), or None. Two kernels compute the same maths: the explicit one below
        (the weights are part of its result) and torch's fused one; which is faster is decided
        outside the maths (core.encoder.kernels.explicit_attention_is_faster)."""
        if need_weights or explicit_attention_is_faster(q):
            weights = self.attention_weights(q, k, mask)
            context = self.dropout(weights).to(v.dtype) @ v      # (B, H, T, Dh)
            return context, (weights if need_weights else None)
        p = self.attention_dropout if self.training else 0.0
        return F.scaled_dot_product_attention(q, k, v, attn_mask=sdpa_mask(mask, q), dropout_p=p), None

    @staticmethod
    def attention_weights(q, k, mask):
        """softmax(Q K^T / sqrt(Dh) + mask), (B, H, T, T): the scores, scaled, masked and
        normalised in fp32 at least, whatever the weights' precision. On a CPU in bf16, fewer
        than 16 keys get masked zero keys added for the softmax (core.encoder.kernels.key_padding:
        the same weights to fp32 rounding, a faster kernel), cut off again in the view returned."""
        n_keys = k.shape[-2]
        pad = key_padding(q, n_keys)
        if pad:
            k = F.pad(k, (0, 0, 0, pad))
            mask = pad_keys(mask, pad, n_keys, q.device)
        scores = at_least_fp32(q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        weights = (scores if mask is None else scores + mask).softmax(dim=-1)
        return weights[..., :n_keys] if pad else weights

    def heads(self, x, mask, need_weights: bool = False):
        """Every head's output side by side (B, T, D), head h in columns h*Dh ... (h+1)*Dh - 1:
        the input of the output projection. And the weights (B, H, T, T) when asked for."""
        B, T, D = x.shape
        q, k, v = (self.split_heads(t) for t in self.project_qkv(x))   # each (B, H, T, Dh)
        context, weights = self.attend(q, k, v, mask, need_weights)
        return context.transpose(1, 2).reshape(B, T, D), weights      # merge heads: (B, T, D)

    def pattern(self, x, mask):
        """The attention weights (B, H, T, T) of input x: softmax(Q K^T / sqrt(Dh) + mask)."""
        q, k, _ = (self.split_heads(t) for t in self.project_qkv(x))
        return self.attention_weights(q, k, mask)

    def project(self, heads):
        """The heads' outputs (B, T, D) mixed into the attention's output by out_lin."""
        return self.out_lin(heads)

    def forward(self, x, mask, need_weights: bool = False):
        heads, weights = self.heads(x, mask, need_weights)
        return self.project(heads), weights


class FFN(nn.Module):
    """Position-wise feed-forward: FFN(x) = W2 · GELU(W1 · x + b1) + b2, each token on its own."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.lin1 = Linear(cfg.dim, cfg.hidden_dim)
        self.activation = nn.GELU(approximate="tanh" if cfg.activation == "gelu_tanh" else "none")
        self.lin2 = Linear(cfg.hidden_dim, cfg.dim)
        self.dropout = nn.Dropout(cfg.dropout)

    @property
    def approximate(self) -> str:
        """GELU's form, "none" (exact, erf) or "tanh": what a fused kernel is told to compute."""
        return self.activation.approximate

    def forward(self, x):
        return self.dropout(self.lin2(self.activation(self.lin1(x))))


class TransformerBlock(nn.Module):
    """Attention and FFN sublayers, each with a residual connection and a LayerNorm."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.pre_norm = cfg.norm == "pre"
        self.attention = MultiHeadSelfAttention(cfg)
        self.sa_layer_norm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)
        self.ffn = FFN(cfg)
        self.output_layer_norm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)
        self.dropout = nn.Dropout(cfg.dropout)

    def forward(self, x, mask, need_weights: bool = False):
        a, w = self.attention(self.attention_input(x), mask, need_weights)
        return self.finish(x, self.dropout(a)), w

    # The seams: forward is attention_input -> attention -> finish, and finish is
    # add_attention -> ffn_branch -> add_ffn. Batched techniques call them on their own tensors.
    def attention_input(self, x):
        """What the attention reads: LN(x) pre-norm, x itself post-norm."""
        return self.sa_layer_norm(x) if self.pre_norm else x

    def add_attention(self, x, a):
        """The residual stream after the attention branch a: x + a (pre-norm), LN(x + a) (post)."""
        return x + a if self.pre_norm else self.sa_layer_norm(x + a)

    def ffn_branch(self, y):
        """The FFN's output (before its residual add) on the stream y after attention."""
        return self.ffn(self.output_layer_norm(y) if self.pre_norm else y)

    def add_ffn(self, y, f):
        """The block's output: y + f (pre-norm), LN(y + f) (post-norm)."""
        return y + f if self.pre_norm else self.output_layer_norm(y + f)

    def finish(self, x, a):
        """The end of the block after attention: the block's output given its input x and the
        attention's output a (after out_lin)."""
        y = self.add_attention(x, a)
        return self.add_ffn(y, self.ffn_branch(y))


class AttentionPooling(nn.Module):
    """A learned query vector q (D) for attention pooling: the sentence vector is
    Σ_t softmax_t(q · h_t / √D) h_t over its real tokens (core/encoder/pooling.py computes it).
    q starts at zero, where every token weighs the same: mean pooling, which training moves from."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.query = nn.Parameter(torch.zeros(cfg.dim))


class Transformer(nn.Module):
    """The stack of blocks (DistilBERT calls it ``transformer`` with a ``layer`` list)."""

    def __init__(self, cfg: EncoderConfig):
        super().__init__()
        self.layer = nn.ModuleList(TransformerBlock(cfg) for _ in range(cfg.n_layers))


class Encoder(nn.Module):
    """Embeddings + blocks. Returns the last hidden state, and on request every layer's
    hidden states and attention weights. Its state_dict is a DistilBertModel's.
    init=False skips BERT's initialisation, for a caller that loads every weight next."""

    def __init__(self, cfg: EncoderConfig, init: bool = True):
        super().__init__()
        self.config = cfg
        self.embeddings = Embeddings(cfg)
        self.transformer = Transformer(cfg)
        # Pre-norm stacks leave the residual stream un-normalised; one last LayerNorm fixes that.
        self.final_layer_norm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps) if cfg.norm == "pre" else None
        self.attention_pooling = AttentionPooling(cfg) if cfg.pooling == "attention" else None
        if init:
            init_weights(self, cfg)

    def set_pooling(self, method: str) -> None:
        """Make ``method`` the pooling this model is trained for; attention pooling gets its
        query vector (at zero: mean pooling) unless the model has one already, any other
        pooling drops it."""
        self.config.pooling = method
        if method != "attention":
            self.attention_pooling = None        # the checkpoint's keys follow its config
        elif self.attention_pooling is None:
            self.attention_pooling = AttentionPooling(self.config).to(self.embeddings.word_embeddings.weight.device)

    @property
    def pooling_query(self) -> torch.Tensor | None:
        """The learned query of attention pooling (D), or None for a model without one."""
        return None if self.attention_pooling is None else self.attention_pooling.query

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                output_hidden_states: bool = False, output_attentions: bool = False) -> EncoderOutput:
        x = self.embeddings(input_ids, token_type_ids)          # (B, T, D)
        mask = self.bias(attention_mask, x)
        hidden, attentions = [x], []
        for block in self.transformer.layer:
            x, w = block(x, mask, need_weights=output_attentions)
            hidden.append(x)
            attentions.append(w)
        if self.final_layer_norm is not None:
            x = self.final_layer_norm(x)
        return EncoderOutput(
            last_hidden_state=x,
            hidden_states=tuple(hidden) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
        )

    def bias(self, attention_mask, x):
        """The additive mask every block's attention adds to its scores, for hidden states x
        (B, T, D): padding and, causal, the triangle; None when nothing is masked."""
        return attention_bias(attention_mask, x.shape[1], x.dtype, x.device, self.config.attention == "causal")

    def run_from(self, index: int, x, bias):
        """The final hidden states (B, T, D) given hidden state ``index`` x (0 = the embeddings'
        output, i = block i's output): blocks index+1 .. L, then the final LayerNorm if any."""
        for block in self.transformer.layer[index:]:
            x, _ = block(x, bias)
        return self.normalise_layer(x)

    def normalise_layer(self, h):
        """Put any layer's hidden state where the MLM head expects it (pre-norm: the final LN)."""
        return h if self.final_layer_norm is None else self.final_layer_norm(h)


class EncoderForMaskedLM(nn.Module):
    """Encoder + masked-LM head: transform -> GELU -> LayerNorm -> projection tied to the
    word embeddings. The body is called ``distilbert`` so that a DistilBertForMaskedLM
    state_dict loads as it is."""

    def __init__(self, cfg: EncoderConfig, init: bool = True):
        super().__init__()
        self.config = cfg
        self.distilbert = Encoder(cfg, init)
        self.vocab_transform = Linear(cfg.dim, cfg.dim)
        self.vocab_layer_norm = nn.LayerNorm(cfg.dim, eps=cfg.layer_norm_eps)
        self.vocab_projector = Linear(cfg.dim, cfg.vocab_size)
        self.approximate = "tanh" if cfg.activation == "gelu_tanh" else "none"
        if init:
            # the head only: the body drew its weights first, exactly as an Encoder alone does, so
            # that one seed starts every objective (MLM, clm, SimCSE) from the same encoder
            for part in (self.vocab_transform, self.vocab_layer_norm, self.vocab_projector):
                init_weights(part, cfg)
        self.tie_weights()

    @property
    def encoder(self) -> Encoder:
        return self.distilbert

    def tie_weights(self):
        self.vocab_projector.weight = self.distilbert.embeddings.word_embeddings.weight

    def head(self, h):                                          # (B, T, D) -> (B, T, V)
        h = self.vocab_transform(h, gelu=self.approximate)
        return self.vocab_projector(self.vocab_layer_norm(h))

    def forward(self, input_ids, attention_mask=None, token_type_ids=None,
                output_hidden_states: bool = False, output_attentions: bool = False):
        out = self.distilbert(input_ids, attention_mask, token_type_ids,
                              output_hidden_states, output_attentions)
        return self.head(out.last_hidden_state), out            # logits (B, T, V), EncoderOutput

    def layer_logits(self, hidden_states):
        """The MLM head applied to every layer's hidden state: what each layer would guess."""
        return [self.head(self.distilbert.normalise_layer(h)) for h in hidden_states]


_LAYER = re.compile(r"(?:^|\.)layer\.(\d+)\.(attention|sa_layer_norm|ffn|output_layer_norm)\.")


def parameter_group(name: str) -> str:
    """The block and sublayer a parameter belongs to, by its state-dict name."""
    m = _LAYER.search(name)
    if m:
        part = "attention" if m.group(2) in ("attention", "sa_layer_norm") else "FFN"
        return f"layer {int(m.group(1)) + 1} {part}"
    if "embeddings." in name:
        return "embeddings"
    if "final_layer_norm" in name:
        return "final norm"
    if name.startswith("vocab_"):
        return "MLM head"
    return "other"


def init_weights(module: nn.Module, cfg: EncoderConfig):
    """BERT's init: normal(0, 0.02) weights, zero biases, LayerNorm at identity."""
    for m in module.modules():
        if isinstance(m, nn.Linear):
            nn.init.normal_(m.weight, std=cfg.initializer_range)
            nn.init.zeros_(m.bias)
        elif isinstance(m, nn.Embedding) and m.weight.requires_grad:
            nn.init.normal_(m.weight, std=cfg.initializer_range)
            if m.padding_idx is not None:
                with torch.no_grad():
                    m.weight[m.padding_idx].zero_()
        elif isinstance(m, nn.LayerNorm):
            nn.init.ones_(m.weight)
            nn.init.zeros_(m.bias)
