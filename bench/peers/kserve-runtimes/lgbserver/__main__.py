"""`python -m lgbserver --model_name M --model_dir D [--nthread N]`: a LightGBM booster (model.bst)
on KServe's model server, as KServe's lgbserver serves it (named inputs by the booster's features)."""

from lightgbm import Booster

from skiff_kserve_runtime import FrameworkModel, arguments, serve

if __name__ == "__main__":
    args = arguments(nthread=True)
    serve(
        FrameworkModel(
            args.model_name,
            args.model_dir,
            (".bst",),
            lambda path: Booster(params={"nthread": args.nthread}, model_file=path),
            lambda booster, instances: booster.predict(instances),
            columns=lambda booster: booster.feature_name(),
        )
    )
