"""A plain per-site federated loop written the way the iFedAvg reference code does it, as the
yardstick for benchmarks/speed.py: one model, optimiser, LR scheduler and DataLoader per site,
state-dict averaging in Python, and scikit-learn metrics for every site every round.

It uses the same model (fedcore's MLP), loss, optimiser settings and hold-out as the engine, so
the difference measured is how the work is organised, not what is computed.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import balanced_accuracy_score, f1_score, roc_auc_score
from torch.utils.data import DataLoader, TensorDataset

from fedcore.federation import Federation, class_weights
from fedcore.models import MLP


class ReferenceLoop:
    def __init__(self, federation: Federation, rounds: int, local_f_in: bool, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.federation = federation
        initial = MLP(federation.n_features, federation.n_classes)
        self.models = [MLP(federation.n_features, federation.n_classes) for _ in federation.sites]
        for model in self.models:
            model.load_state_dict(initial.state_dict())
        self.optimizers = [torch.optim.SGD(m.parameters(), lr=0.002, momentum=0.5) for m in self.models]
        step = max(1, rounds // 50)
        self.schedulers = [torch.optim.lr_scheduler.StepLR(o, step_size=step, gamma=0.9) for o in self.optimizers]
        self.loaders = [
            DataLoader(TensorDataset(s.x_train, s.y_train), batch_size=16, shuffle=True) for s in federation.sites
        ]
        self.weights = [class_weights(s.y_train, federation.n_classes) for s in federation.sites]
        self.local = {"f_in.b", "f_in.w"} if local_f_in else set()

    def round(self) -> None:
        for model, optimizer, scheduler, loader, weight in zip(
            self.models, self.optimizers, self.schedulers, self.loaders, self.weights
        ):
            model.train()
            for x, y in loader:
                optimizer.zero_grad()
                F.nll_loss(model(x), y, weight=weight, reduction="sum").backward()
                optimizer.step()
            scheduler.step()
        states = [m.state_dict() for m in self.models]
        for name in states[0]:
            if name not in self.local:
                mean = torch.stack([s[name].float() for s in states]).mean(0)
                for state in states:
                    state[name].copy_(mean)

    def evaluate(self) -> list[dict[str, float]]:
        scores = []
        for model, site in zip(self.models, self.federation.sites):
            model.eval()
            with torch.no_grad():
                prob = model(site.x_test).exp().numpy()
            y, pred = site.y_test.numpy(), prob.argmax(1)
            auc = (roc_auc_score(y, prob[:, 1]) if prob.shape[1] == 2
                   else roc_auc_score(y, prob, multi_class="ovo", labels=np.arange(prob.shape[1])))
            scores.append({"f1": f1_score(y, pred, average="weighted"), "roc_auc": auc,
                           "balanced_accuracy": balanced_accuracy_score(y, pred)})
        return scores
