"""What the attention inspector computes from a model's attentions: heads, layer means, rollout,
hidden tokens, top links, entropy, and their files. Pure numpy: it knows no model."""
