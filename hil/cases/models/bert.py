"""MobileBERT's factories: hil's masked LM, and the sequence classifier that upstream's tests
fine-tune and train quantization-aware (models/test_mobilebert_finetuning.py,
models/test_mobilebert_qat.py), reduced and made judgeable without downloads.

Upstream fine-tunes the published `google/mobilebert-uncased` on SST-2 (the fine-tuning test)
or on a CSV of paper titles and their conferences (the QAT test), downloaded at test time, and
its QAT test loads an accuracy metric from the Hugging Face hub. Nothing can be downloaded
here, and transformers is not a dependency: the encoder is hil's MobileBERT
(`hil.cases.models.nets`, 4 layers, vocabulary 1024), randomly initialised from a fixed seed,
its classifier fitted (ridge regression, `hil.cases.models.fit`) to generated sentences whose
class shows in their tokens (`GeneratedSentences`). The fp32 model then decides with margins
like a fine-tuned one, and the checker's agreement measures the quantization. QAT then runs
upstream's training loop (AdamW, lr 3e-5, weight decay 0.01, cross-entropy, 5 steps) on
generated batches that are never evaluated.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from hil.cases.datasets import GeneratedSentences, GeneratedTokens

QAT_BATCH = 60_000
"""First dataset batch index QAT trains on (evaluation is 0, fitting from 50,000)."""


def mobilebert(dataset: GeneratedTokens, layers: int) -> nn.Module:
    """hil's MobileBERT with a masked-LM decoder. The generated tokens follow a rule (each is
    a fixed permutation of the one before), so a masked token is known from its neighbours;
    the decoder reads them from the last hidden state: a ridge map from the hidden states of
    masked positions to their neighbours' input embeddings, then, for each token, the score
    of its predecessor's and successor's embeddings (a matched filter)."""
    from hil.cases.models.fit import TRAIN_BATCH, layer_inputs, ridge
    from hil.cases.models.nets import MobileBertForMaskedLm

    model = MobileBertForMaskedLm(vocab=dataset.vocab, layers=layers).eval()
    training = dataclasses.replace(dataset, count=64)
    batches = [training.batch(TRAIN_BATCH + i, 0) for i in range(4)]
    hidden = layer_inputs(model, model.decoder, [b.inputs for b in batches])
    successor = training.successor()
    predecessor = torch.empty_like(successor)
    predecessor[successor] = torch.arange(successor.numel())
    masked = torch.cat([torch.as_tensor(b.targets) for b in batches]) >= 0
    tokens = torch.cat([torch.as_tensor(b.targets) for b in batches])[masked]
    words = model.encoder.word.weight.detach()
    neighbours = torch.cat([words[predecessor[tokens]], words[successor[tokens]]], dim=1)
    weight, bias = ridge(hidden[masked], neighbours)
    vocab = dataset.vocab - 1  # the mask id is never a prediction
    every = torch.arange(vocab)
    filters = torch.cat([words[predecessor[every]], words[successor[every]]], dim=1)
    scale = 8.0 / float((filters * filters).sum(1).mean())  # the right token scores about 8
    with torch.no_grad():
        model.decoder.weight.zero_()
        model.decoder.bias.fill_(-8.0)
        model.decoder.weight[:vocab] = scale * filters @ weight
        model.decoder.bias[:vocab] = scale * filters @ bias
    return model


def mobilebert_classifier(dataset: GeneratedSentences, layers: int, scale: float = 8.0) -> nn.Module:
    """hil's MobileBERT sequence classifier for `dataset`'s classes, random init, the
    classifier fitted to its labels (logits of `scale`: the QAT model's are fitted at 2, so
    that upstream's absolute atol of 0.03 is about one quantization step of its output, as
    for a fine-tuned model's logits)."""
    from hil.cases.models import fit_classifier
    from hil.cases.models.nets import MobileBertForSequenceClassification

    model = MobileBertForSequenceClassification(vocab=dataset.vocab, layers=layers,
                                                labels=dataset.classes).eval()
    return fit_classifier(model, "classifier", dataclasses.replace(dataset, count=32), strength=0.1,
                          scale=scale)


def train_qat(dataset: GeneratedSentences, prepared: torch.fx.GraphModule, steps: int = 5,
              lr: float = 3e-5) -> None:
    """Upstream's `trainingQuantModel_QAT` (examples/samsung/scripts/mobilebert_finetune_QAT.py)
    for `steps` steps on batches of `dataset` (a case's `qat` is a partial of it with the
    dataset bound): the prepared model in train mode, AdamW (`lr`, weight decay 0.01),
    cross-entropy on the logits; back in eval mode after. Upstream trains 5 steps of 2
    samples on a model exported with a dynamic batch; hil's program has the static shape of
    the evaluated batch, so its 5 steps take batches of that size."""
    from torchao.quantization.pt2e import move_exported_model_to_eval, move_exported_model_to_train

    move_exported_model_to_train(prepared)
    optimizer = torch.optim.AdamW(prepared.parameters(), lr=lr, weight_decay=0.01)
    criterion = nn.CrossEntropyLoss()
    for step in range(steps):
        sample = dataset.batch(QAT_BATCH + step, 0)
        loss = criterion(prepared(*sample.inputs), torch.as_tensor(sample.targets))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    move_exported_model_to_eval(prepared)
