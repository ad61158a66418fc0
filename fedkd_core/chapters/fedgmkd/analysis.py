"""Measurements beyond the tables: the prototype identity on real features (Eq. 5 against the class
mean and the released code's prototype)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .grid import Params, data_config


def prototype_identity(params: Params, seed: int = 0, epochs: int = 2) -> pd.DataFrame:
    """Per class of client 0 (first client count, seed ``seed``): train ``params.model`` on the
    client's data for ``epochs`` epochs, take its 32-d features and compare the paper's Eq. 5
    prototype (BIC-best GMM), the class mean (FedHKD) and the released code's prototype. Rows:
    class, images, GMM components, ‖Eq. 5 − mean‖, ‖mean‖, ‖code‖ (all in the feature space)."""
    import torch

    from ...algorithms.fedgmkd import class_prototypes
    from ...federation import build_federated_data
    from ...models import InputShape, make_model
    from ...randomness import party_generator
    from ...training import predict_features, train

    data = build_federated_data(data_config(params, params.client_counts()[0]), seed=seed)
    shape = InputShape(data.dataset.in_channels, data.dataset.image_size, data.num_classes)
    model = make_model(params.model, shape, seed=seed).to(memory_format=torch.channels_last)
    indices = data.client_train[0]
    train(model, data.dataset, indices, params.train, generator=party_generator(seed, 0, 0), epochs=epochs)
    features, _ = predict_features(model, data.dataset, indices)
    labels = data.dataset.y_train[torch.as_tensor(indices)]
    fit = {"max_components": params.max_components}
    rules = {rule: class_prototypes(features, labels, data.num_classes, prototype=rule, **fit) for rule in ("gmm", "mean", "code")}
    held = np.flatnonzero(rules["mean"].counts.numpy())
    gap = (rules["gmm"].prototypes - rules["mean"].prototypes).norm(dim=1)
    return pd.DataFrame({"class": held, "images": rules["mean"].counts.numpy()[held],
                         "GMM components": rules["gmm"].components.numpy()[held],
                         "‖Eq. 5 − class mean‖": gap.numpy()[held],
                         "‖class mean‖": rules["mean"].prototypes.norm(dim=1).numpy()[held],
                         "‖code prototype‖": rules["code"].prototypes.norm(dim=1).numpy()[held]})
