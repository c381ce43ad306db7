"""`python -m xgbserver --model_name M --model_dir D [--nthread N]`: an XGBoost booster
(model.bst, .json or .ubj) on KServe's model server, as KServe's xgbserver serves it."""

import xgboost as xgb

from skiff_kserve_runtime import FrameworkModel, arguments, serve

if __name__ == "__main__":
    args = arguments(nthread=True)

    def load(path):
        with open(path, "rb") as f:
            return xgb.Booster(params={"nthread": args.nthread}, model_file=bytearray(f.read()))

    def predict(booster, instances):
        return booster.predict(xgb.DMatrix(instances, nthread=args.nthread))

    serve(FrameworkModel(args.model_name, args.model_dir, (".bst", ".json", ".ubj"), load, predict))
