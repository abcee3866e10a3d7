"""What produced an output: code, config values, input hashes, libraries, models, device, time.

Every output of the pipeline carries one provenance record (a JSON-able dict):
figures in their PNG text chunks and PDF info dictionary, parquet tables in their footer
metadata, JSON results under the key `provenance`, other files in a `<file>.prov.json` sidecar.

Each record is sealed by two digests, so that `sinkscope audit` can tell whether a file was
changed after it was written, and which part:
- `content_sha256`, the hash of the output's own content:
  JSON: sha256 of the canonical JSON (sorted keys, compact) of the object without `provenance`;
  sidecar: sha256 of the described file's bytes;
  PNG: sha256 of the file without the record's text chunk (the image as rendered);
  PDF and parquet: sha256 of the file's bytes with the record's own bytes (the PDF keywords
  string, the parquet footer value) left out. The record is written with placeholder digests of
  the same length, the hash is taken around it, then the placeholder is overwritten in place;
- `record_sha256`, the hash of the canonical JSON of the record itself, content hash included.
Each input is named by the hash of its file and, where it carries a record, by that record's two
digests, so the records of a run form a chain up to the scorecard. A record is accepted only in
the exact bytes a writer produces (PNG chunks with their CRCs, the PDF string escaped as written,
the parquet footer value, JSON as indented): any edit of a record's bytes is found.
`read` returns the record without the digests; `seal_of` says whether they hold.

Every file is written atomically (`sinkscope.files`); the code version of a job is
`sinkscope.codedigest`'s. The package: `record` builds a job's record; `seal` holds what every
format shares; one module per format holds its writer beside its checker (`jsonfile` for JSON
outputs and sidecars, `parquet`, `png`, `pdf`; `figure` writes both figure formats);
`verify` reads a file's record back and checks its seal.
"""

from ..errors import BadInput
from .figure import save_figure
from .jsonfile import json_text, sealed, write_json, write_sidecar, write_with_sidecar
from .parquet import ParquetStream, write_parquet
from .record import (
    Recorder,
    describe_device,
    git_state,
    installed_version,
    loaded_code,
    package_versions,
)
from .seal import CONTENT, KEY, PLACEHOLDER, RECORD, SIDECAR_SUFFIX, Found, Seal, json_digest
from .verify import content_check, read, seal_of

__all__ = [
    "CONTENT",
    "KEY",
    "PLACEHOLDER",
    "RECORD",
    "SIDECAR_SUFFIX",
    "BadInput",
    "Found",
    "ParquetStream",
    "Recorder",
    "Seal",
    "content_check",
    "describe_device",
    "git_state",
    "installed_version",
    "json_digest",
    "json_text",
    "loaded_code",
    "package_versions",
    "read",
    "save_figure",
    "seal_of",
    "sealed",
    "write_json",
    "write_parquet",
    "write_sidecar",
    "write_with_sidecar",
]
