"""The data stages: corpus -> vocabulary -> language sources and views -> layouts -> batches and masking.

`run_data.RunData(cfg, mods)` is what training and evaluation read; `prepare.prepare` builds the
cached corpus and vocabulary; `sources/` holds one file per language source.
"""
