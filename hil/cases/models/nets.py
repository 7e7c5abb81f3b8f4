"""Compact re-implementations of the upstream models whose packages are not installed here
(torchsr's EDSR, torchaudio's Wav2Letter, Hugging Face's MobileBERT and its sequence
classifier), written from the
published architectures. Layer structure follows the originals; sizes are parameters, and
the `models` suite says in its tags where it uses a reduced configuration.
"""

from __future__ import annotations

import math

import torch
from torch import nn

# -- EDSR (Lim et al. 2017; torchsr `edsr_r16f64`) ----------------------------------------


class MeanShift(nn.Conv2d):
    """Fixed 1x1 conv adding (sign=+1) or subtracting (sign=-1) the DIV2K RGB mean."""

    def __init__(self, sign: float, rgb_mean: tuple[float, float, float] = (0.4488, 0.4371, 0.4040)) -> None:
        super().__init__(3, 3, kernel_size=1)
        with torch.no_grad():
            self.weight.copy_(torch.eye(3).view(3, 3, 1, 1))
            self.bias.copy_(sign * torch.tensor(rgb_mean))
        self.requires_grad_(False)


class ResBlock(nn.Module):
    """conv → ReLU → conv, scaled by `res_scale`, plus the input."""

    def __init__(self, features: int, res_scale: float) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(features, features, 3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(features, features, 3, padding=1),
        )
        self.res_scale = res_scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x) * self.res_scale


class Edsr(nn.Module):
    """Enhanced Deep Residual network for single-image super-resolution: mean shift, head
    conv, `blocks` residual blocks and a conv, global skip, sub-pixel upsampler, tail conv."""

    def __init__(self, scale: int = 2, blocks: int = 16, features: int = 64, res_scale: float = 1.0) -> None:
        super().__init__()
        self.sub_mean = MeanShift(-1.0)
        self.head = nn.Conv2d(3, features, 3, padding=1)
        self.body = nn.Sequential(
            *[ResBlock(features, res_scale) for _ in range(blocks)],
            nn.Conv2d(features, features, 3, padding=1),
        )
        upsampler: list[nn.Module] = []
        for _ in range(int(math.log2(scale))):
            upsampler += [nn.Conv2d(features, 4 * features, 3, padding=1), nn.PixelShuffle(2)]
        self.tail = nn.Sequential(*upsampler, nn.Conv2d(features, 3, 3, padding=1))
        self.add_mean = MeanShift(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.sub_mean(x))
        x = x + self.body(x)
        return self.add_mean(self.tail(x))


# -- Wav2Letter (Collobert et al. 2016; torchaudio `models.Wav2Letter`, waveform input) ----


class Wav2Letter(nn.Module):
    """Fully convolutional ASR acoustic model on raw 16 kHz audio: a strided waveform conv
    (`width` filters, window 250, hop 160), a stride-2 conv, seven 7-wide convs, a 32-wide
    `wide`-filter conv, two 1x1 convs, ReLU after each, log-softmax over the labels.
    torchaudio's sizes: width 250, wide 2000."""

    def __init__(self, num_classes: int = 29, width: int = 250, wide: int = 2000) -> None:
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv1d(1, width, kernel_size=250, stride=160, padding=45), nn.ReLU(inplace=True),
            nn.Conv1d(width, width, kernel_size=48, stride=2, padding=23), nn.ReLU(inplace=True),
        ]
        for _ in range(7):
            layers += [nn.Conv1d(width, width, kernel_size=7, padding=3), nn.ReLU(inplace=True)]
        layers += [
            nn.Conv1d(width, wide, kernel_size=32, padding=16), nn.ReLU(inplace=True),
            nn.Conv1d(wide, wide, kernel_size=1), nn.ReLU(inplace=True),
            nn.Conv1d(wide, num_classes, kernel_size=1), nn.ReLU(inplace=True),
        ]
        self.acoustic_model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log_softmax(self.acoustic_model(x), dim=1)


# -- MobileBERT (Sun et al. 2020; Hugging Face `MobileBertModel`) --------------------------


class NoNorm(nn.Module):
    """MobileBERT's replacement of LayerNorm: an elementwise affine map."""

    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(features))
        self.bias = nn.Parameter(torch.zeros(features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.bias


class MobileBertLayer(nn.Module):
    """One inverted-bottleneck transformer block: bottleneck in (hidden → intra), shared
    query/key bottleneck, multi-head attention, `ffn_stack` feed-forward networks at the
    intra size, bottleneck out (intra → hidden) with the block's residual."""

    def __init__(self, hidden: int, intra: int, heads: int, intermediate: int, ffn_stack: int) -> None:
        super().__init__()
        self.heads = heads
        self.input_bottleneck = nn.Linear(hidden, intra)
        self.input_norm = NoNorm(intra)
        self.shared_bottleneck = nn.Linear(hidden, intra)
        self.shared_norm = NoNorm(intra)
        self.query = nn.Linear(intra, intra)
        self.key = nn.Linear(intra, intra)
        self.value = nn.Linear(hidden, intra)
        self.attention_out = nn.Linear(intra, intra)
        self.attention_norm = NoNorm(intra)
        self.ffn = nn.ModuleList(
            nn.ModuleDict({"up": nn.Linear(intra, intermediate), "down": nn.Linear(intermediate, intra),
                           "norm": NoNorm(intra)})
            for _ in range(ffn_stack)
        )
        self.output_bottleneck = nn.Linear(intra, hidden)
        self.output_norm = NoNorm(hidden)

    def _split(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, width = x.shape
        return x.view(batch, length, self.heads, width // self.heads).transpose(1, 2)

    def forward(self, hidden: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask`: added to the attention scores (0 where a position may be attended, a large
        negative number where not), broadcast over the heads."""
        layer_input = self.input_norm(self.input_bottleneck(hidden))
        shared = self.shared_norm(self.shared_bottleneck(hidden))
        q, k = self._split(self.query(shared)), self._split(self.key(shared))
        v = self._split(self.value(hidden))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        if mask is not None:
            scores = scores + mask
        context = torch.softmax(scores, dim=-1) @ v
        context = context.transpose(1, 2).reshape(layer_input.shape)
        x = self.attention_norm(self.attention_out(context) + layer_input)
        for block in self.ffn:
            x = block["norm"](block["down"](torch.relu(block["up"](x))) + x)
        return self.output_norm(self.output_bottleneck(x) + hidden)


class MobileBert(nn.Module):
    """MobileBERT encoder: trigram word embedding (embedding → concat of neighbours →
    projection), position and token-type embeddings, NoNorm, `layers` MobileBERT blocks.
    Returns the last hidden state `(N, length, hidden)`. Published: vocab 30522, 24 layers."""

    def __init__(self, vocab: int = 30522, layers: int = 24, hidden: int = 512, intra: int = 128,
                 embedding: int = 128, heads: int = 4, intermediate: int = 512, ffn_stack: int = 4,
                 max_positions: int = 512) -> None:
        super().__init__()
        self.word = nn.Embedding(vocab, embedding)
        self.project = nn.Linear(3 * embedding, hidden)
        self.position = nn.Embedding(max_positions, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.norm = NoNorm(hidden)
        self.layers = nn.ModuleList(
            MobileBertLayer(hidden, intra, heads, intermediate, ffn_stack) for _ in range(layers)
        )

    def forward(self, ids: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """`mask`: the additive attention mask of every layer (see `MobileBertLayer`)."""
        words = self.word(ids)
        pad = torch.zeros_like(words[:, :1])
        trigram = torch.cat(
            [torch.cat([words[:, 1:], pad], dim=1), words, torch.cat([pad, words[:, :-1]], dim=1)], dim=2
        )
        positions = torch.arange(ids.shape[1], device=ids.device)
        x = self.project(trigram) + self.position(positions) + self.token_type(torch.zeros_like(ids))
        x = self.norm(x)
        for layer in self.layers:
            x = layer(x, mask)
        return x


class MobileBertForMaskedLm(nn.Module):
    """The MobileBERT encoder with a masked-language-model head: a linear decoder from the
    last hidden state to the vocabulary. Returns token logits `(N, length, vocab)`.
    (Hugging Face's head adds a transform and ties part of the decoder to the embeddings;
    the head here is a single linear layer, fitted by `hil.cases.models`.)"""

    def __init__(self, vocab: int = 30522, layers: int = 24) -> None:
        super().__init__()
        self.encoder = MobileBert(vocab=vocab, layers=layers)
        self.decoder = nn.Linear(self.encoder.norm.weight.shape[0], vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(ids))


MASKED_SCORE = -255.0
"""What a padded position adds to the attention scores: upstream's MobileBERT QAT script
(`transform_attention_mask` of examples/samsung/scripts/mobilebert_finetune_QAT.py) uses -255
rather than Hugging Face's dtype minimum, which int8 scores could not represent."""


def additive_mask(keep: torch.Tensor) -> torch.Tensor:
    """`(N, 1, L, L)` additive mask from a `(N, L)` mask of 1 (attend) and 0 (padding), as
    upstream's `transform_attention_mask` builds it."""
    mask = keep.to(torch.float32).unsqueeze(1).unsqueeze(2)
    return (1.0 - mask.repeat(1, 1, mask.shape[3], 1)) * MASKED_SCORE


class MobileBertForSequenceClassification(nn.Module):
    """The MobileBERT encoder with Hugging Face's sequence-classification head for
    `google/mobilebert-uncased` (`classifier_activation: false`: the pooled output is the first
    token's last hidden state), then a linear classifier. Takes the token ids and an attention
    mask: `(N, L)` of 1 and 0 (upstream's fine-tuning test), or already additive `(N, 1, L, L)`
    (upstream's QAT test, `additive_mask`). Returns logits `(N, labels)`."""

    def __init__(self, vocab: int = 30522, layers: int = 24, labels: int = 2) -> None:
        super().__init__()
        self.encoder = MobileBert(vocab=vocab, layers=layers)
        self.classifier = nn.Linear(self.encoder.norm.weight.shape[0], labels)

    def forward(self, ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        mask = additive_mask(attention_mask) if attention_mask.dim() == 2 else attention_mask
        return self.classifier(self.encoder(ids, mask)[:, 0])


# -- Inception-v4 (Szegedy et al. 2016; timm `inception_v4`, Cadene's pretrainedmodels) ----


class BasicConv2d(nn.Sequential):
    """conv (no bias) → BatchNorm (eps 1e-3) → ReLU."""

    def __init__(self, cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1,
                 padding: int | tuple[int, int] = 0) -> None:
        super().__init__(nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False),
                         nn.BatchNorm2d(cout, eps=0.001), nn.ReLU(inplace=True))


class _Branches(nn.Module):
    """Parallel branches concatenated on channels."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.branches], dim=1)


def _seq(*layers: nn.Module) -> nn.Sequential:
    return nn.Sequential(*layers)


def _pool_proj(cin: int, cout: int) -> nn.Sequential:
    return _seq(nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False), BasicConv2d(cin, cout, 1))


def _inception_a() -> nn.Module:
    return _Branches(
        BasicConv2d(384, 96, 1),
        _seq(BasicConv2d(384, 64, 1), BasicConv2d(64, 96, 3, padding=1)),
        _seq(BasicConv2d(384, 64, 1), BasicConv2d(64, 96, 3, padding=1), BasicConv2d(96, 96, 3, padding=1)),
        _pool_proj(384, 96),
    )


def _inception_b() -> nn.Module:
    return _Branches(
        BasicConv2d(1024, 384, 1),
        _seq(BasicConv2d(1024, 192, 1), BasicConv2d(192, 224, (1, 7), padding=(0, 3)),
             BasicConv2d(224, 256, (7, 1), padding=(3, 0))),
        _seq(BasicConv2d(1024, 192, 1), BasicConv2d(192, 192, (7, 1), padding=(3, 0)),
             BasicConv2d(192, 224, (1, 7), padding=(0, 3)), BasicConv2d(224, 224, (7, 1), padding=(3, 0)),
             BasicConv2d(224, 256, (1, 7), padding=(0, 3))),
        _pool_proj(1024, 128),
    )


class _InceptionC(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.branch0 = BasicConv2d(1536, 256, 1)
        self.branch1 = BasicConv2d(1536, 384, 1)
        self.branch1a = BasicConv2d(384, 256, (1, 3), padding=(0, 1))
        self.branch1b = BasicConv2d(384, 256, (3, 1), padding=(1, 0))
        self.branch2 = _seq(BasicConv2d(1536, 384, 1), BasicConv2d(384, 448, (3, 1), padding=(1, 0)),
                            BasicConv2d(448, 512, (1, 3), padding=(0, 1)))
        self.branch2a = BasicConv2d(512, 256, (1, 3), padding=(0, 1))
        self.branch2b = BasicConv2d(512, 256, (3, 1), padding=(1, 0))
        self.branch3 = _pool_proj(1536, 256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b1, b2 = self.branch1(x), self.branch2(x)
        return torch.cat([self.branch0(x), self.branch1a(b1), self.branch1b(b1),
                          self.branch2a(b2), self.branch2b(b2), self.branch3(x)], dim=1)


class InceptionV4(nn.Module):
    """Inception-v4: stem (Mixed 3a/4a/5a), 4 Inception-A, Reduction-A, 7 Inception-B,
    Reduction-B, 3 Inception-C, global average pool, linear classifier."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            BasicConv2d(3, 32, 3, stride=2), BasicConv2d(32, 32, 3), BasicConv2d(32, 64, 3, padding=1),
            _Branches(nn.MaxPool2d(3, stride=2), BasicConv2d(64, 96, 3, stride=2)),
            _Branches(_seq(BasicConv2d(160, 64, 1), BasicConv2d(64, 96, 3)),
                      _seq(BasicConv2d(160, 64, 1), BasicConv2d(64, 64, (1, 7), padding=(0, 3)),
                           BasicConv2d(64, 64, (7, 1), padding=(3, 0)), BasicConv2d(64, 96, 3))),
            _Branches(BasicConv2d(192, 192, 3, stride=2), nn.MaxPool2d(3, stride=2)),
            *[_inception_a() for _ in range(4)],
            _Branches(BasicConv2d(384, 384, 3, stride=2),
                      _seq(BasicConv2d(384, 192, 1), BasicConv2d(192, 224, 3, padding=1),
                           BasicConv2d(224, 256, 3, stride=2)),
                      nn.MaxPool2d(3, stride=2)),
            *[_inception_b() for _ in range(7)],
            _Branches(_seq(BasicConv2d(1024, 192, 1), BasicConv2d(192, 192, 3, stride=2)),
                      _seq(BasicConv2d(1024, 256, 1), BasicConv2d(256, 256, (1, 7), padding=(0, 3)),
                           BasicConv2d(256, 320, (7, 1), padding=(3, 0)), BasicConv2d(320, 320, 3, stride=2)),
                      nn.MaxPool2d(3, stride=2)),
            *[_InceptionC() for _ in range(3)],
        )
        self.last_linear = nn.Linear(1536, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.last_linear(self.features(x).mean(dim=(2, 3)))
