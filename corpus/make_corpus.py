#!/usr/bin/env python3
"""Build normdoctor's real-model corpus (corpus/*.pt) from public model code.

Every model here is built by the libraries' own code (torchvision, timm,
transformers, diffusers) from a small configuration with random weights
(fixed seeds, no hub downloads), put in eval mode as users do before saving,
and saved as TorchScript: torch.jit.script where the code scripts,
torch.jit.trace otherwise (the README's table says which). Next to each
NAME.pt go

  NAME.input.pt   torch.save of a Python list of tensors, the forward
                  arguments in order (padding masks where the model takes
                  them);
  NAME.pt2        torch.export.export(model, inputs, dynamic_shapes=...)
                  of the same eval-mode model, saved with
                  torch.export.save; the batch axis of every input and
                  the length axis of every [batch, length] input are
                  Dim.AUTO, so the probes that run one example alone or
                  change the length can run it (export keeps an axis
                  static where the model's code fixes it: Whisper's
                  frames);
  NAME.facts.json what Python knows about the model and the tests can check:
                  named_modules() paths with class names, training flags,
                  zero-initialized parameters, parameters without
                  requires_grad, per-module output RMS/absmax of the primary
                  output tensor for the sample batch in eval mode.

Run with the corpus environment (corpus/requirements.txt):

  python3 -m venv /work/.venv-corpus
  /work/.venv-corpus/bin/pip install torch==2.14.1 torchvision==0.29.1
  /work/.venv-corpus/bin/pip install -r corpus/requirements.txt
  /work/.venv-corpus/bin/python corpus/make_corpus.py            # all models
  /work/.venv-corpus/bin/python corpus/make_corpus.py --only NAME
  /work/.venv-corpus/bin/python corpus/make_corpus.py --check    # committed files current?

Versions these files were made with: torch 2.14.1, torchvision 0.29.1,
timm 1.0.31, transformers 5.24.0, diffusers 0.42.1
(see requirements.txt). The four files copied from ../shared/real-models
(tv_mobilenet_v3_small, hf_bert_tiny, hf_llama_tiny, tv_vit_tiny; saved by
PyTorch 2.11) are not rebuilt here; their .pt2 files are (shared_eager).
Every .pt and .pt2 is re-packed with deflated records (repack_deflated).
"""

import argparse
import json
import math
import os
import sys
import warnings

import torch
import torch.nn as nn

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 0
# Every model here has its .pt2 too (tests/torch/corpus_test.cpp runs them
# like the .pt), the four copies of ../shared from their Python code with the
# copied file's weights (shared_eager), but for the copied
# tv_mobilenet_v3_small: its 1.5M random weights make a 5.9 MB .pt2 that would
# take the committed corpus over its 40 MB limit (issue 13), and its code
# (torchvision's MobileNetV3) is exported in tv_mobilenet_v3_large_w025.pt2.
# `--pt2-only --only NAME --force` writes it for a local run. Every archive
# is re-packed deflated (repack_deflated) to fit the rest.
PT2_SKIP = {"tv_mobilenet_v3_small"}
MODELS = {}


def model(name, how):
    """Registers a builder: fn() -> (eager module, list of input tensors)."""

    def deco(fn):
        MODELS[name] = (fn, how)
        return fn

    return deco


def image(n, c, h, w, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, c, h, w, generator=g)


def tokens(b, t, vocab, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (b, t), generator=g)


def right_mask(b, t, pad_from):
    """[B, T] int64 attention mask; row 1 padded from position pad_from."""
    m = torch.ones(b, t, dtype=torch.int64)
    m[1, pad_from:] = 0
    return m


def left_mask(b, t, real_from):
    """[B, T] int64 attention mask; row 1 LEFT padded: real from real_from on."""
    m = torch.ones(b, t, dtype=torch.int64)
    m[1, :real_from] = 0
    return m


class LastHidden(nn.Module):
    """Wraps a transformers model to return its last hidden state tensor."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state


class Logits(nn.Module):
    """Wraps a transformers LM-head model to return its logits tensor."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_ids, attention_mask):
        return self.m(input_ids=input_ids, attention_mask=attention_mask).logits


class AudioLastHidden(nn.Module):
    """Wraps a transformers audio encoder (input_values, attention_mask)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_values, attention_mask):
        return self.m(input_values, attention_mask=attention_mask).last_hidden_state


class FeaturesLastHidden(nn.Module):
    """Wraps an encoder whose only argument is input features (Whisper)."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, input_features):
        return self.m(input_features).last_hidden_state


# ---------------------------------------------------------------- torchvision


@model("tv_efficientnet_b0_w025", "script")
def tv_efficientnet():
    from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf

    setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.34)
    m = EfficientNet(setting, dropout=0.2, last_channel=last, num_classes=10)
    return m, [image(4, 3, 64, 64)]


@model("tv_mobilenet_v3_large_w025", "script")
def tv_mobilenet_large():
    from torchvision.models import mobilenet_v3_large

    return mobilenet_v3_large(weights=None, width_mult=0.25, num_classes=10), [image(4, 3, 64, 64)]


@model("tv_regnet_y_tiny", "script")
def tv_regnet():
    from torchvision.models.regnet import BlockParams, RegNet

    bp = BlockParams.from_init_params(depth=5, w_0=16, w_a=8.0, w_m=2.0, group_width=8, se_ratio=0.25)
    return RegNet(bp, num_classes=10, stem_width=16), [image(4, 3, 64, 64)]


@model("tv_convnext_tiny", "script")
def tv_convnext():
    from torchvision.models.convnext import CNBlockConfig, ConvNeXt

    cfg = [CNBlockConfig(16, 32, 1), CNBlockConfig(32, 64, 1), CNBlockConfig(64, None, 2)]
    return ConvNeXt(cfg, stochastic_depth_prob=0.1, num_classes=10), [image(4, 3, 64, 64)]


@model("tv_swin_tiny", "script")
def tv_swin():
    from torchvision.models.swin_transformer import SwinTransformer

    m = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[2, 4], window_size=[4, 4],
                        stochastic_depth_prob=0.1, num_classes=10)
    return m, [image(4, 3, 32, 32)]


@model("tv_densenet_tiny", "script")
def tv_densenet():
    from torchvision.models.densenet import DenseNet

    return DenseNet(growth_rate=8, block_config=(2, 2, 2), num_init_features=16, bn_size=2, num_classes=10), [
        image(4, 3, 64, 64)]


@model("tv_shufflenet_v2_tiny", "script")
def tv_shufflenet():
    from torchvision.models.shufflenetv2 import ShuffleNetV2

    return ShuffleNetV2([2, 2, 2], [8, 16, 32, 64, 128], num_classes=10), [image(4, 3, 64, 64)]


class DetrBackbone(nn.Module):
    """DETR's backbone (facebookresearch/detr models/backbone.py BackboneBase):
    a torchvision ResNet with FrozenBatchNorm2d, IntermediateLayerGetter, the
    stem and layer1 frozen (requires_grad False, as DETR does), then DETR's
    1x1 input projection to the transformer width. Layers [1, 1, 1, 1]
    BasicBlocks, cut after layer2 to keep the file small."""

    def __init__(self):
        super().__init__()
        from torchvision.models._utils import IntermediateLayerGetter
        from torchvision.models.resnet import BasicBlock, ResNet
        from torchvision.ops.misc import FrozenBatchNorm2d

        backbone = ResNet(BasicBlock, [1, 1, 1, 1], norm_layer=FrozenBatchNorm2d)
        for name, p in backbone.named_parameters():
            if "layer2" not in name and "layer3" not in name and "layer4" not in name:
                p.requires_grad_(False)
        self.body = IntermediateLayerGetter(backbone, return_layers={"layer2": "0"})
        self.input_proj = nn.Conv2d(128, 32, kernel_size=1)

    def forward(self, x):
        return self.input_proj(self.body(x)["0"])


@model("tv_detr_backbone", "script")
def tv_detr():
    return DetrBackbone(), [image(2, 3, 64, 64)]


# ----------------------------------------------------------------------- timm


@model("timm_resnet_tiny", "script")
def timm_resnet():
    from timm.models.resnet import Bottleneck, ResNet

    m = ResNet(Bottleneck, [1, 1, 1, 1], channels=(8, 16, 32, 64), stem_width=8, num_classes=10)
    return m, [image(4, 3, 64, 64)]


@model("timm_efficientnet_tiny", "script")
def timm_efficientnet():
    from timm.models.efficientnet import _gen_efficientnet

    m = _gen_efficientnet("efficientnet_b0", channel_multiplier=0.25, depth_multiplier=0.34, pretrained=False,
                          num_classes=10)
    return m, [image(4, 3, 64, 64)]


@model("timm_deit_tiny_distilled", "script")
def timm_deit():
    from timm.models.deit import VisionTransformerDistilled

    m = VisionTransformerDistilled(img_size=32, patch_size=4, embed_dim=64, depth=4, num_heads=4, num_classes=10)
    return m, [image(4, 3, 32, 32)]


@model("timm_convnext_atto_tiny", "script")
def timm_convnext():
    from timm.models.convnext import ConvNeXt

    m = ConvNeXt(depths=(1, 1, 2, 1), dims=(16, 32, 48, 64), num_classes=10, ls_init_value=1e-6)
    return m, [image(4, 3, 64, 64)]


# ------------------------------------------------------------------- diffusers


class UNetSample(nn.Module):
    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, sample, timestep):
        return self.m(sample, timestep).sample


@model("df_unet2d_tiny", "trace")
def df_unet():
    from diffusers import UNet2DModel

    m = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(16, 32),
                    norm_num_groups=8, attention_head_dim=8,
                    down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                    up_block_types=("AttnUpBlock2D", "UpBlock2D"))
    return UNetSample(m), [image(2, 3, 16, 16), torch.tensor([10, 500], dtype=torch.int64)]


# ---------------------------------------------------------------- transformers


def _hf_eager(cls, cfg):
    m = cls(cfg)
    return m


@model("hf_gpt2_lm_tiny", "trace")
def hf_gpt2():
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4, bos_token_id=0, eos_token_id=0)
    return Logits(GPT2LMHeadModel(cfg)), [tokens(2, 16, 1000), right_mask(2, 16, 10)]


@model("hf_t5_encoder_tiny", "trace")
def hf_t5():
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(vocab_size=1000, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=32)
    return LastHidden(T5EncoderModel(cfg)), [tokens(2, 16, 1000), right_mask(2, 16, 10)]


@model("hf_qwen2_tiny", "trace")
def hf_qwen2():
    from transformers import Qwen2Config, Qwen2Model

    cfg = Qwen2Config(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LastHidden(Qwen2Model(cfg)), [tokens(2, 16, 1000), left_mask(2, 16, 6)]


@model("hf_mistral_tiny", "trace")
def hf_mistral():
    from transformers import MistralConfig, MistralModel

    cfg = MistralConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64,
                        sliding_window=8)
    return LastHidden(MistralModel(cfg)), [tokens(2, 16, 1000), left_mask(2, 16, 6)]


@model("hf_distilbert_tiny", "trace")
def hf_distilbert():
    from transformers import DistilBertConfig, DistilBertModel

    cfg = DistilBertConfig(vocab_size=1000, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=64)
    return LastHidden(DistilBertModel(cfg)), [tokens(2, 16, 1000), right_mask(2, 16, 10)]


@model("hf_albert_tiny", "trace")
def hf_albert():
    from transformers import AlbertConfig, AlbertModel

    cfg = AlbertConfig(vocab_size=1000, embedding_size=32, hidden_size=64, num_hidden_layers=4,
                       num_attention_heads=4, intermediate_size=128, max_position_embeddings=64)
    return LastHidden(AlbertModel(cfg)), [tokens(2, 16, 1000), right_mask(2, 16, 10)]


def _audio(b, n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, n, generator=g)


@model("hf_wav2vec2_tiny", "trace")
def hf_wav2vec2():
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    cfg = Wav2Vec2Config(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                         conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                         feat_extract_norm="group", num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
                         do_stable_layer_norm=False, mask_time_prob=0.0)
    n = 1600
    x = _audio(2, n)
    mask = right_mask(2, n, 1200)
    x[1, 1200:] = 0.0  # padded with zeros, as Wav2Vec2FeatureExtractor pads
    return AudioLastHidden(Wav2Vec2Model(cfg)), [x, mask]


@model("hf_wav2vec2_conformer_tiny", "trace")
def hf_conformer():
    from transformers import Wav2Vec2ConformerConfig, Wav2Vec2ConformerModel

    cfg = Wav2Vec2ConformerConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
                                  conv_dim=(32, 32, 32), conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3),
                                  feat_extract_norm="layer", num_conv_pos_embeddings=16,
                                  num_conv_pos_embedding_groups=4, conv_depthwise_kernel_size=7,
                                  position_embeddings_type="rotary", mask_time_prob=0.0)
    n = 1600
    x = _audio(2, n)
    mask = right_mask(2, n, 1200)
    x[1, 1200:] = 0.0
    return AudioLastHidden(Wav2Vec2ConformerModel(cfg)), [x, mask]


@model("hf_whisper_encoder_tiny", "trace")
def hf_whisper():
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    cfg = WhisperConfig(num_mel_bins=16, d_model=64, encoder_layers=2, encoder_attention_heads=4,
                        encoder_ffn_dim=128, max_source_positions=50, vocab_size=1000)
    g = torch.Generator().manual_seed(1)
    return FeaturesLastHidden(WhisperEncoder(cfg)), [torch.randn(2, 16, 100, generator=g)]


@model("hf_vit_tiny", "trace")
def hf_vit():
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(image_size=32, patch_size=4, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128)

    class W(nn.Module):
        def __init__(self):
            super().__init__()
            self.m = ViTModel(cfg, add_pooling_layer=False)

        def forward(self, pixel_values):
            return self.m(pixel_values=pixel_values).last_hidden_state

    return W(), [image(4, 3, 32, 32)]


# -------------------------------------------------------------------- facts


def first_tensor(o):
    """The primary output tensor: the tensor, or the first floating tensor of a
    tuple/list/dict/ModelOutput (depth first)."""
    if isinstance(o, torch.Tensor):
        return o if o.is_floating_point() else None
    if isinstance(o, dict):
        o = list(o.values())
    if isinstance(o, (list, tuple)):
        for v in o:
            t = first_tensor(v)
            if t is not None:
                return t
    return None


def facts(m, inputs, how):
    """What Python knows about the eager model (eval mode, sample batch)."""
    stats = {}
    hooks = []
    for path, mod in m.named_modules():
        def hook(mod, args, out, path=path):
            t = first_tensor(out)
            if t is None or path in stats:  # first call of a module (shared modules run again)
                return
            t = t.detach().double()
            finite = torch.isfinite(t)
            stats[path] = {"rms": float(t[finite].pow(2).mean().sqrt()) if finite.any() else None,
                           "absmax": float(t[finite].abs().max()) if finite.any() else None,
                           "shape": list(t.shape), "finite": bool(finite.all())}
        hooks.append(mod.register_forward_hook(hook))
    with torch.no_grad():
        m(*inputs)
    for h in hooks:
        h.remove()
    zero = [n for n, p in m.named_parameters() if p.numel() > 0 and bool((p == 0).all())]
    ones = [n for n, p in m.named_parameters() if p.numel() > 0 and bool((p == 1).all())]
    frozen = [n for n, p in m.named_parameters() if not p.requires_grad]
    return {
        "saved_by": how,
        "parameters": sum(p.numel() for p in m.parameters()),
        "modules": [[p, type(x).__name__] for p, x in m.named_modules()],
        "training": {p: x.training for p, x in m.named_modules()},
        "zero_init_params": zero,
        "ones_init_params": ones,
        "no_requires_grad_params": frozen,
        "buffers": [[n, list(b.shape)] for n, b in m.named_buffers()],
        "inputs": [[list(t.shape), str(t.dtype).replace("torch.", "")] for t in inputs],
        "module_output_stats": stats,
        "versions": versions(),
    }


def versions():
    v = {"torch": torch.__version__}
    for name in ("torchvision", "timm", "transformers", "diffusers"):
        try:
            v[name] = __import__(name).__version__
        except Exception:  # not installed
            pass
    return v


SHARED = ["tv_mobilenet_v3_small", "hf_bert_tiny", "hf_llama_tiny", "tv_vit_tiny"]


def shared_facts(name):
    """Facts of a file copied from ../shared/real-models, read from the
    TorchScript file itself (no Python model to rebuild: other versions)."""
    sm = torch.jit.load(os.path.join(HERE, name + ".pt"))
    inputs = torch.load(os.path.join(HERE, name + ".input.pt"))
    return {
        "saved_by": "copied from ../shared/real-models (PyTorch 2.11)",
        "parameters": sum(p.numel() for p in sm.parameters()),
        "modules": [[p, x.original_name] for p, x in sm.named_modules()],
        "training": {p: x.training for p, x in sm.named_modules()},
        "zero_init_params": [n for n, p in sm.named_parameters() if p.numel() > 0 and bool((p == 0).all())],
        "ones_init_params": [n for n, p in sm.named_parameters() if p.numel() > 0 and bool((p == 1).all())],
        "no_requires_grad_params": [n for n, p in sm.named_parameters() if not p.requires_grad],
        "buffers": [[n, list(b.shape)] for n, b in sm.named_buffers()],
        "inputs": [[list(t.shape), str(t.dtype).replace("torch.", "")] for t in inputs],
        "module_output_stats": None,
    }


def write_shared_facts():
    for n in SHARED:
        with open(os.path.join(HERE, n + ".facts.json"), "w") as fh:
            json.dump(shared_facts(n), fh, indent=1)
            fh.write("\n")


def shared_eager(name):
    """The Python model of a file copied from ../shared/real-models, for its
    .pt2: the same public code and configuration (its README's table) built
    by this environment's libraries, holding the TorchScript file's own
    weights (load_state_dict; every key of either side accounted for, see
    below), in eval mode. make_pt2_shared checks
    it computes what the copied file computes on the committed batch."""
    sm = torch.jit.load(os.path.join(HERE, name + ".pt"))
    sd = sm.state_dict()
    if name == "tv_mobilenet_v3_small":
        from torchvision.models import mobilenet_v3_small
        m = mobilenet_v3_small(num_classes=10)
    elif name == "tv_vit_tiny":
        from torchvision.models.vision_transformer import VisionTransformer
        m = VisionTransformer(image_size=32, patch_size=4, num_layers=4, num_heads=4, hidden_dim=64, mlp_dim=128,
                              num_classes=10)
    elif name == "hf_bert_tiny":
        from transformers import BertConfig, BertModel
        cfg = BertConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                         intermediate_size=128, max_position_embeddings=512)
        m = LastHidden(BertModel(cfg))
    elif name == "hf_llama_tiny":
        from transformers import LlamaConfig, LlamaModel
        cfg = LlamaConfig(vocab_size=1000, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2)
        m = LastHidden(LlamaModel(cfg))
    else:
        raise KeyError(name)
    # A TorchScript state_dict holds every buffer; an eager one leaves out
    # non-persistent buffers (Llama's rotary inv_freq) and buffers a newer
    # transformers no longer registers (BERT's position_ids/token_type_ids,
    # persistent in 5.17): each must equal the model's own value or its
    # default (arange / zeros), and nothing else may differ.
    res = m.load_state_dict(sd, strict=False)
    assert not res.missing_keys, f"{name}: the copied file lacks {res.missing_keys}"
    own = dict(m.named_buffers())
    for k in res.unexpected_keys:
        if k in own:
            want = own[k]
        elif k.endswith("position_ids"):
            want = torch.arange(sd[k].shape[-1]).expand_as(sd[k])
        elif k.endswith("token_type_ids"):
            want = torch.zeros_like(sd[k])
        else:
            raise AssertionError(f"{name}: the copied file has {k}, which this model does not")
        assert torch.equal(sd[k], want.to(sd[k].dtype)), f"{name}: {k} differs from the model's own value"
    m.eval()
    return m


def make_pt2_shared(name):
    """NAME.pt2 of a copied file: its Python model (shared_eager) exported
    like the built ones (save_pt2), checked against the copied TorchScript."""
    inputs = torch.load(os.path.join(HERE, name + ".input.pt"))
    with torch.no_grad():
        ref = out_of(torch.jit.load(os.path.join(HERE, name + ".pt"))(*inputs))
        err = float((out_of(shared_eager(name)(*inputs)) - ref).abs().max())
    assert err < 1e-4, f"{name}: the rebuilt Python model differs from the copied TorchScript file by {err}"
    save_pt2(name, None, inputs, ref, fresh=shared_eager(name))
    print(f"{name}: .pt2 (copied file's weights), {os.path.getsize(os.path.join(HERE, name + '.pt2')) / 1e6:.2f} MB")


def repack_deflated(path):
    """Rewrites the zip archive at `path` with every record deflated (zip
    method 8), in the same order with the same names. torch.jit.save and
    torch.export.save store records uncompressed; PyTorch's reader
    (PyTorchStreamReader, miniz) and normdoctor's own .pt2 reader read
    deflated records too, and deflating the graph JSON and TorchScript code
    is what keeps every model of the corpus with its .pt2 under the 40 MB
    limit. fixtures/ keeps stored archives, so both layouts are tested."""
    import zipfile
    tmp = path + ".deflating"
    with zipfile.ZipFile(path) as zi, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as zo:
        for info in zi.infolist():
            out = zipfile.ZipInfo(info.filename, date_time=(1980, 1, 1, 0, 0, 0))
            out.compress_type = zipfile.ZIP_DEFLATED
            zo.writestr(out, zi.read(info))
    os.replace(tmp, path)


def build(name):
    fn, how = MODELS[name]
    torch.manual_seed(SEED)
    m, inputs = fn()
    m.eval()
    return m, inputs, how


def to_script(m, inputs, how):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if how == "script":
            return torch.jit.script(m)
        return torch.jit.trace(m, tuple(inputs), check_trace=False)


def out_of(o):
    t = first_tensor(o)
    assert t is not None, "model returned no floating tensor"
    return t


def save(name):
    m, inputs, how = build(name)
    with torch.no_grad():
        ref = out_of(m(*inputs))
    sm = to_script(m, inputs, how)
    path = os.path.join(HERE, name + ".pt")
    torch.jit.save(sm, path)
    repack_deflated(path)
    torch.save(list(inputs), os.path.join(HERE, name + ".input.pt"))
    # The saved file must compute what the eager model computes.
    loaded = torch.jit.load(path)
    with torch.no_grad():
        got = out_of(loaded(*inputs))
    err = float((got - ref).abs().max())
    assert err < 1e-4, f"{name}: TorchScript output differs from eager by {err}"
    save_pt2(name, m, inputs, ref)
    f = facts(m, inputs, how)
    with open(os.path.join(HERE, name + ".facts.json"), "w") as fh:
        json.dump(f, fh, indent=1, sort_keys=False)
        fh.write("\n")
    print(f"{name}: {how}, {f['parameters']} parameters, {os.path.getsize(path) / 1e6:.2f} MB, "
          f"output {list(ref.shape)}, zero-init {len(f['zero_init_params'])}")


def dynamic_shapes_of(inputs):
    """Dim.AUTO on the batch axis (0) of every input and on the length axis
    of every 2-D input ([batch, tokens], [batch, samples], their masks):
    normdoctor's probes run single examples and sub-batches and pad or cut
    sequences, which a program specialized to the sample's sizes cannot run
    (docs/pt2.md). AUTO lets export keep an axis static where the model's
    code fixes it instead of failing."""
    auto = torch.export.Dim.AUTO
    return tuple({0: auto, 1: auto} if t.dim() == 2 else {0: auto} for t in inputs)


def save_pt2(name, m, inputs, ref, fresh=None):
    """torch.export of the eval-mode model on the sample batch, with a
    dynamic batch axis and dynamic lengths (dynamic_shapes_of). A freshly
    built copy is exported, not m: m has run forward, and a module that
    caches a tensor of the last length (Wav2Vec2Conformer's rotary
    embedding) would have export bake that tensor, sized for the sample,
    into the program."""
    if fresh is None:
        fresh, _, _ = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ep = torch.export.export(fresh, tuple(inputs), dynamic_shapes=dynamic_shapes_of(inputs))
    # Each node's stack_trace names files of the machine that exported it
    # (its site-packages paths) and is about a quarter of the graph JSON;
    # normdoctor reads nn_module_stack, never stack_trace, and the corpus
    # must stay under 40 MB. fixtures/pt2/ keeps them, so the reader is
    # still tested on archives that carry them.
    for node in ep.graph.nodes:
        node.meta.pop("stack_trace", None)
    path = os.path.join(HERE, name + ".pt2")
    torch.export.save(ep, path)
    repack_deflated(path)
    with torch.no_grad():
        got = out_of(torch.export.load(path).module()(*inputs))
    err = float((got - ref).abs().max())
    assert err < 1e-4, f"{name}: exported program's output differs from eager by {err}"
    with torch.no_grad():  # the batch axis really is dynamic: one example alone runs
        torch.export.load(path).module()(*[t[:1] for t in inputs])


def pt2_only(name):
    """Writes NAME.pt2 alone (the .pt, batch and facts stay as committed)."""
    if name in SHARED:
        return make_pt2_shared(name)
    m, inputs, _ = build(name)
    with torch.no_grad():
        ref = out_of(m(*inputs))
    save_pt2(name, m, inputs, ref)
    print(f"{name}: .pt2, {os.path.getsize(os.path.join(HERE, name + '.pt2')) / 1e6:.2f} MB")


def check(name):
    """Committed files current: the committed batch equals the regenerated
    one, the committed TorchScript computes what the freshly built model
    computes on it, and the facts match."""
    m, inputs, how = build(name)
    path = os.path.join(HERE, name + ".pt")
    problems = []
    if not os.path.exists(path):
        return [f"{name}: {path} missing"]
    committed = torch.load(os.path.join(HERE, name + ".input.pt"))
    if len(committed) != len(inputs) or any(not torch.equal(a, b) for a, b in zip(committed, inputs)):
        problems.append(f"{name}: {name}.input.pt differs from the regenerated batch")
    loaded = torch.jit.load(path)
    loaded.eval()
    with torch.no_grad():
        ref = out_of(m(*inputs))
        got = out_of(loaded(*committed))
    if got.shape != ref.shape or float((got - ref).abs().max()) > 1e-4:
        problems.append(f"{name}: committed {name}.pt output differs from the regenerated model's")
    problems += archive_problems(name, committed, ref, "the regenerated model's")
    fpath = os.path.join(HERE, name + ".facts.json")
    old = json.load(open(fpath)) if os.path.exists(fpath) else None
    new = facts(m, inputs, how)
    if old is None:
        problems.append(f"{name}: {name}.facts.json missing")
    else:
        for key in ("modules", "training", "zero_init_params", "no_requires_grad_params", "saved_by", "inputs"):
            if old.get(key) != json.loads(json.dumps(new[key])):
                problems.append(f"{name}: facts '{key}' differ")
        for p, s in new["module_output_stats"].items():
            o = old["module_output_stats"].get(p)
            if o is None or (s["rms"] is not None and not math.isclose(o["rms"], s["rms"], rel_tol=1e-4, abs_tol=1e-7)):
                problems.append(f"{name}: output RMS of '{p}' differs")
                break
    return problems


CORPUS_LIMIT = 40_000_000  # bytes: "keep the committed corpus under 40 MB" (issue 13)


def corpus_bytes():
    """The size of the corpus as committed: every file of corpus/ but
    Python's caches."""
    return sum(os.path.getsize(os.path.join(HERE, f)) for f in os.listdir(HERE)
               if not f.startswith("__") and os.path.isfile(os.path.join(HERE, f)))


def stored_records(path):
    """Records of the archive at `path` that are not deflated (repack_deflated)."""
    import zipfile
    with zipfile.ZipFile(path) as z:
        return [i.filename for i in z.infolist() if i.compress_type != zipfile.ZIP_DEFLATED]


def archive_problems(name, inputs, ref, whose):
    """NAME.pt2 (unless PT2_SKIP) computes `ref` on `inputs` within 1e-4,
    and NAME.pt and NAME.pt2 are re-packed deflated (repack_deflated)."""
    problems = []
    path, p2 = os.path.join(HERE, name + ".pt"), os.path.join(HERE, name + ".pt2")
    if name not in PT2_SKIP:
        if not os.path.exists(p2):
            problems.append(f"{name}: {p2} missing")
        else:
            with torch.no_grad():
                got = out_of(torch.export.load(p2).module()(*inputs))
            if got.shape != ref.shape or float((got - ref).abs().max()) > 1e-4:
                problems.append(f"{name}: committed {name}.pt2 output differs from {whose}")
    for f in (path, p2):
        if os.path.exists(f) and stored_records(f):
            problems.append(f"{name}: {os.path.basename(f)} is not re-packed deflated (repack_deflated)")
    return problems


def check_shared(name):
    """A copied file's facts are its own, and its .pt2 (unless PT2_SKIP)
    computes what the copied TorchScript computes on the committed batch."""
    problems = []
    fpath = os.path.join(HERE, name + ".facts.json")
    if not (os.path.exists(fpath) and json.load(open(fpath)) == json.loads(json.dumps(shared_facts(name)))):
        problems.append(f"{name}: {name}.facts.json differs from the file's")
    inputs = torch.load(os.path.join(HERE, name + ".input.pt"))
    with torch.no_grad():
        ref = out_of(torch.jit.load(os.path.join(HERE, name + ".pt"))(*inputs))
    return problems + archive_problems(name, inputs, ref, "the copied TorchScript file's")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", action="append", help="build (or check) only this model; repeatable")
    ap.add_argument("--check", action="store_true", help="verify the committed files are current; write nothing")
    ap.add_argument("--list", action="store_true", help="list the models")
    ap.add_argument("--pt2-only", action="store_true", help="write only the .pt2 files")
    ap.add_argument("--force", action="store_true", help="with --pt2-only: also the models of PT2_SKIP")
    a = ap.parse_args()
    names = a.only or list(MODELS)
    for n in names:
        if n not in MODELS and n not in SHARED:
            sys.exit(f"unknown model {n}; known: {', '.join(list(MODELS) + SHARED)}")
    shared = [n for n in (a.only or SHARED) if n in SHARED]
    names = [n for n in names if n in MODELS]
    if a.pt2_only:
        for n in names + shared:
            if n not in PT2_SKIP or a.force:
                pt2_only(n)
        return
    if a.list:
        for n in names:
            print(n, MODELS[n][1])
        for n in shared:
            print(n, "copied from ../shared/real-models")
        return
    if a.check:
        problems = []
        for n in shared:
            p = check_shared(n)
            print(f"{n}: {'ok' if not p else 'STALE'} (copied file: facts and .pt2)")
            problems += p
        for n in names:
            p = check(n)
            print(f"{n}: {'ok' if not p else 'STALE'}")
            problems += p
        if not a.only:
            size = corpus_bytes()
            print(f"corpus: {size / 1e6:.2f} MB of {CORPUS_LIMIT / 1e6:.0f} MB")
            if size > CORPUS_LIMIT:
                problems.append(f"the committed corpus is {size} bytes, over its {CORPUS_LIMIT}-byte limit (issue 13)")
        for p in problems:
            print(p, file=sys.stderr)
        sys.exit(1 if problems else 0)
    for n in names:
        save(n)
    for n in shared:
        if n not in PT2_SKIP:
            make_pt2_shared(n)
    if not a.only:
        write_shared_facts()


if __name__ == "__main__":
    main()
