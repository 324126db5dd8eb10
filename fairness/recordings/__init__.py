"""Stage 2 (replay) — recorded answers: the `Recording` record, the on-disk store and replay."""

from fairness.recordings._record import Recording, join_rows
from fairness.recordings._store import Manifest, ModelInfo, RecordingSet, ReplayProvider, content_key, merge_recordings

__all__ = ["Manifest", "ModelInfo", "Recording", "RecordingSet", "ReplayProvider", "content_key", "join_rows", "merge_recordings"]
