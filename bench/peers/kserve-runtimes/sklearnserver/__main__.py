"""`python -m sklearnserver --model_name M --model_dir D [--http_port P]`: a scikit-learn model
(model.joblib, .pkl or .pickle, loaded with joblib) on KServe's model server; PREDICT_PROBA=true
answers predict_proba where the model has it, as KServe's sklearnserver does."""

import os

import joblib

from skiff_kserve_runtime import FrameworkModel, arguments, serve


def predict(model, instances):
    if os.environ.get("PREDICT_PROBA", "false").lower() == "true" and hasattr(model, "predict_proba"):
        return model.predict_proba(instances)
    return model.predict(instances)


if __name__ == "__main__":
    args = arguments(nthread=False)
    serve(FrameworkModel(args.model_name, args.model_dir, (".joblib", ".pkl", ".pickle"), joblib.load, predict))
