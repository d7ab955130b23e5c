"""The footer: Textual's, showing only the keys that fit whole. A narrow terminal loses the
last keys of the table (the least important, console/keys.py), never half a word;
`?` and the palette list them all."""

from __future__ import annotations

from textual.widgets import Footer
from textual.widgets._footer import FooterKey


class KeysFooter(Footer):
    def on_resize(self) -> None:
        self.call_after_refresh(self.fit)

    async def recompose(self) -> None:
        await super().recompose()
        self.call_after_refresh(self.fit)

    def fit(self) -> None:
        keys = list(self.query_children(FooterKey))
        room = self.size.width
        for key in keys:
            if key.has_class("-command-palette"):
                room -= self.natural_width(key)
        used = 0
        for key in keys:
            if key.has_class("-command-palette"):
                continue
            used += self.natural_width(key)
            key.display = used <= room

    def natural_width(self, key: FooterKey) -> int:
        return key.get_content_width(self.size, self.app.size) + key.styles.gutter.width
