"""Environment pools speaking one small protocol: ``reset(mask, seeds) / send / recv``.

Each pool steps ``num_envs`` environments; ``reset`` (re)starts the masked ones from given
seeds, so an episode's trajectory depends on its seed and actions alone, never on which env
of which pool ran it. Importing this package imports no simulator; pools import theirs lazily.
"""
