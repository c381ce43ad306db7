"""What KServe's framework servers (sklearnserver, xgbserver, lgbserver) share, for running them
as local processes in `skiff up` and as the test cluster's runtime images.

KServe builds those servers from its repository (python/sklearnserver, ...) into its images; they
are not on PyPI, and this repository takes no code from KServe's. These packages are stand-ins of
the same shape, built on the `kserve` package from PyPI (its ModelServer, Model and protocol
helpers): the same module names (`python -m sklearnserver`, the images' entrypoint), the same flags
(KServe's model server flags plus --model_dir, and --nthread for the boosters), the same model
files looked up in --model_dir (exactly one), the same predict (`get_predict_input`, the library's
predict, `get_predict_response`), so V1 and V2 requests answer as KServe's images do. Not here:
loading from a model repository when --model_dir holds no model (KServe's multi-model fallback).
"""

import argparse
import os
from typing import Callable, Dict, Tuple, Union

import kserve
from kserve import Model
from kserve.errors import InferenceError, ModelMissingError
from kserve.protocol.infer_type import InferRequest, InferResponse
from kserve.utils.utils import get_predict_input, get_predict_response


def model_file(model_dir: str, extensions: Tuple[str, ...]) -> str:
    """The one file in model_dir whose name ends with one of extensions (KServe's rule)."""
    found = sorted(
        os.path.join(model_dir, name)
        for name in os.listdir(model_dir)
        if os.path.isfile(os.path.join(model_dir, name)) and name.endswith(extensions)
    )
    if not found:
        raise ModelMissingError(model_dir)
    if len(found) > 1:
        raise RuntimeError(f"More than one model file is detected, Only one is allowed within model_dir: {found}")
    return found[0]


class FrameworkModel(Model):
    """A model loaded by `load(path)` from the one model file, predicting with `predict(model, x)`."""

    def __init__(self, name: str, model_dir: str, extensions: Tuple[str, ...],
                 load: Callable[[str], object], predict: Callable[[object, object], object],
                 columns: Callable[[object], object] = lambda model: None):
        super().__init__(name)
        self.model_dir = model_dir
        self.extensions = extensions
        self._load = load
        self._predict = predict
        self._columns = columns
        self._model = None

    def load(self) -> bool:
        self._model = self._load(model_file(self.model_dir, self.extensions))
        self.ready = True
        return self.ready

    def predict(self, payload: Union[Dict, InferRequest], headers: Dict[str, str] = None
                ) -> Union[Dict, InferResponse]:
        try:
            instances = get_predict_input(payload, columns=self._columns(self._model))
            return get_predict_response(payload, self._predict(self._model, instances), self.name)
        except Exception as e:
            raise InferenceError(str(e))


def arguments(nthread: bool) -> argparse.Namespace:
    """KServe's model server flags, --model_dir and (for the boosters) --nthread."""
    parser = argparse.ArgumentParser(parents=[kserve.model_server.parser])
    parser.add_argument("--model_dir", required=True, help="A local path to the model directory")
    if nthread:
        parser.add_argument("--nthread", default=1, type=int, help="Threads the library uses.")
    args, _ = parser.parse_known_args()
    return args


def serve(model: FrameworkModel) -> None:
    """Loads the model and serves it on KServe's ModelServer (flags read from the command line)."""
    model.load()
    kserve.ModelServer().start([model])
