"""The model, its data and its training rule, shared by the HyperMPMD run
(kernels.py, train.py) and the single-process PyTorch reference
(reference.py), so that both build the same weights from the same seed.

A small multimodal next-token model: a convolutional vision encoder and an
MLP audio encoder turn an image and an audio clip into tokens, which a
4-stage transformer backbone reads beside the text tokens. Each sample has a
hidden class; its text is a sequence that the class determines, so the loss
falls only as the model learns to read the class from the image and audio.
"""
import numpy as np
import torch
from torch import nn

# Sizes: small enough that a few steps run in seconds on one core.
D_MODEL = 32
HEADS = 2
FFN = 64
CLASSES = 8
VOCAB = 17          # 16 symbols and BOS
BOS = 16
IMAGE = 16          # images are 1 x IMAGE x IMAGE
AUDIO_FRAMES = 4    # audio clips are AUDIO_FRAMES x AUDIO_FEATURES
AUDIO_FEATURES = 16
VISION_TOKENS = 4
TEXT = 8            # text tokens per sample
STAGES = 4          # backbone stages
SEQ = VISION_TOKENS + AUDIO_FRAMES + TEXT

# Each sub-model is built from its own seed, so a worker that holds only
# `stage2` builds exactly the reference's `stage2`.
SUBMODELS = ["vision", "audio"] + [f"stage{i}" for i in range(STAGES)]


class VisionEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 3, stride=2, padding=1)   # 16x16 -> 8x8
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2, padding=1)  # 8x8 -> 4x4
        self.pool = nn.AdaptiveAvgPool2d(2)                     # 4 tokens
        self.proj = nn.Linear(16, D_MODEL)

    def forward(self, images):                    # (B, 1, H, W) -> (B, 4, D)
        x = torch.relu(self.conv1(images))
        x = torch.relu(self.conv2(x))
        x = self.pool(x).flatten(2).transpose(1, 2)
        return self.proj(x)


class AudioEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(AUDIO_FEATURES, D_MODEL), nn.ReLU(),
                                 nn.Linear(D_MODEL, D_MODEL))

    def forward(self, audio):                     # (B, F, A) -> (B, F, D)
        return self.net(audio)


def attention_mask():
    """Every position sees the image and audio tokens; text is causal."""
    mask = torch.zeros(SEQ, SEQ, dtype=torch.bool)  # True = may not attend
    start = VISION_TOKENS + AUDIO_FRAMES
    causal = torch.triu(torch.ones(TEXT, TEXT, dtype=torch.bool), diagonal=1)
    mask[start:, start:] = causal
    mask[:start, start:] = True   # media tokens do not read the text
    return mask


class Block(nn.Module):
    """A pre-norm transformer block. Attention has no biases (as in LLaMA):
    a key bias gets no gradient but rounding noise, which Adam would turn
    into full-size updates that no two summation orders agree on."""

    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(D_MODEL)
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL, bias=False)
        self.out = nn.Linear(D_MODEL, D_MODEL, bias=False)
        self.norm2 = nn.LayerNorm(D_MODEL)
        self.ff1 = nn.Linear(D_MODEL, FFN)
        self.ff2 = nn.Linear(FFN, D_MODEL)
        self.register_buffer("mask", attention_mask(), persistent=False)

    def forward(self, h):
        b, s, _ = h.shape
        q, k, v = self.qkv(self.norm1(h)).view(b, s, 3, HEADS, -1).permute(2, 0, 3, 1, 4)
        scores = (q @ k.transpose(-1, -2)) / (q.shape[-1] ** 0.5)
        attended = scores.masked_fill(self.mask, float("-inf")).softmax(-1) @ v
        h = h + self.out(attended.transpose(1, 2).reshape(b, s, D_MODEL))
        return h + self.ff2(torch.relu(self.ff1(self.norm2(h))))


class FirstStage(nn.Module):
    """Embeds the text, joins it to the media tokens, runs a block."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.position = nn.Parameter(torch.randn(SEQ, D_MODEL) * 0.02)
        self.block = Block()

    def forward(self, vision, audio, text):
        h = torch.cat([vision, audio, self.embed(text)], dim=1) + self.position
        return self.block(h)


class LastStage(nn.Module):
    """A block, then next-token logits over the text positions."""

    def __init__(self):
        super().__init__()
        self.block = Block()
        self.norm = nn.LayerNorm(D_MODEL)
        self.head = nn.Linear(D_MODEL, VOCAB)

    def forward(self, h):
        h = self.norm(self.block(h))
        return self.head(h[:, VISION_TOKENS + AUDIO_FRAMES:, :])


def build(name, seed):
    """Sub-model `name` with the weights seed `seed` gives it."""
    torch.manual_seed(seed * 1000 + SUBMODELS.index(name))
    if name == "vision":
        return VisionEncoder()
    if name == "audio":
        return AudioEncoder()
    stage = int(name[len("stage"):])
    if stage == 0:
        return FirstStage()
    if stage == STAGES - 1:
        return LastStage()
    return Block()


def optimizer(module, lr):
    """Adam, as most such models train; its moments are the sub-model's
    optimizer state, resident beside its weights."""
    return torch.optim.Adam(module.parameters(), lr=lr)


def loss_of(logits, labels, micro_batches):
    """The step's loss is the mean over its micro-batches: each one's mean
    cross-entropy, divided by their count, so that summed gradients are the
    step's gradient."""
    return nn.functional.cross_entropy(logits.reshape(-1, VOCAB),
                                       labels.reshape(-1)) / micro_batches


def micro_batch(seed, step, index, size):
    """Micro-batch `index` of step `step`: images (size,1,H,W) f32, audio
    (size,F,A) f32, text (size,T) i64 and labels (size,T) i64."""
    rng = np.random.default_rng([seed, step, index])
    pattern = np.random.default_rng([seed, 7]).standard_normal(
        (CLASSES, IMAGE * IMAGE + AUDIO_FRAMES * AUDIO_FEATURES)).astype(np.float32)
    classes = rng.integers(0, CLASSES, size)
    noise = rng.standard_normal((size, pattern.shape[1])).astype(np.float32)
    media = pattern[classes] + 0.5 * noise
    images = media[:, :IMAGE * IMAGE].reshape(size, 1, IMAGE, IMAGE)
    audio = media[:, IMAGE * IMAGE:].reshape(size, AUDIO_FRAMES, AUDIO_FEATURES)
    # The text of class c counts up from c in steps of c+1 (mod 16) after
    # BOS: its first token can only be read from the image and audio.
    t = np.arange(TEXT)
    labels = (classes[:, None] + t[None, :] * (classes[:, None] + 1)) % BOS
    text = np.concatenate([np.full((size, 1), BOS), labels[:, :-1]], axis=1)
    return (np.ascontiguousarray(images), np.ascontiguousarray(audio),
            text.astype(np.int64), labels.astype(np.int64))


def flat(tensors):
    """Tensors as one flat float32 array (for the all-reduce)."""
    return torch.cat([t.reshape(-1) for t in tensors]).detach().numpy().astype(np.float32)


def unflat(array, like):
    """The inverse of flat(), shaped as the tensors `like`."""
    out, at = [], 0
    for t in like:
        n = t.numel()
        out.append(torch.from_numpy(np.array(array[at:at + n])).reshape(t.shape))
        at += n
    if at != len(array):
        raise ValueError(f"unflat: {len(array)} values for tensors of {at}")
    return out
