"""a0_reranker: the settings modal gets every setting, missing ones with their defaults (A0's ``api/plugins.py``
``Plugins._get_config``, loaded by A0 as the module ``plugins``; see a0_hooks/settings_modal.py)."""

from helpers.extension import Extension

from usr.plugins.a0_reranker.a0_hooks import settings_modal


class A0RerankerCompleteSettings(Extension):
    def execute(self, data: object = None, **kwargs: object) -> None:
        if isinstance(data, dict):
            settings_modal.complete_loaded(data)
