"""The BERTScore encoder is the same model wherever sago is installed: a folder whose path contains
"t5" (bert-score's ``get_model`` then builds a randomly initialised T5 encoder) gives the same
embeddings as the packaged folder."""

import torch

from sago_engine.models import bertscore


def _embed(text: str):
    tok, model = bertscore.get_encoder()
    ids = torch.tensor([tok.encode(text)])
    with torch.no_grad():
        return type(model).__name__, len(model.encoder.layer), model(ids).last_hidden_state


def test_an_install_path_with_t5_in_it_loads_the_same_encoder(tmp_path, monkeypatch):
    real = bertscore.encoder_dir()
    bertscore.get_encoder.cache_clear()
    try:
        name, n_layers, want = _embed("The cat sat on the mat.")
        (tmp_path / "t5user").mkdir()
        (tmp_path / "t5user" / "model").symlink_to(real, target_is_directory=True)
        monkeypatch.setattr(bertscore, "encoder_dir", lambda: tmp_path / "t5user" / "model")
        bertscore.get_encoder.cache_clear()
        name_t5, n_t5, got = _embed("The cat sat on the mat.")
    finally:
        bertscore.get_encoder.cache_clear()
    assert name == name_t5 == "BertModel" and n_layers == n_t5 == bertscore.ENCODER_LAYERS
    assert torch.equal(want, got)
