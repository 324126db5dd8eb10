"""Stage 2 (replay) — recorded answers: the `Recording` record, the on-disk store and replay."""

from fairness.recordings._record import Recording
from fairness.recordings._store import Manifest, RecordingSet, ReplayProvider, content_key, merge_recordings

__all__ = ["Manifest", "Recording", "RecordingSet", "ReplayProvider", "content_key", "merge_recordings"]
