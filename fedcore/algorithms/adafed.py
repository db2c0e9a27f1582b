"""AdaFed (Giuseppi et al.): performance-weighted averaging and an adaptive class-weighted loss.

Each round (the paper's Algorithm 1):
    - the server scores every site's returned model on its test set and turns the score into a
      weight p_i (one of the rules below); the server model is sum_i p_i w_i / sum_i p_i and
      every site receives it;
    - the server scores its new model per class and sets the clients' loss weights for the next
      round to kappa_c = 1 / (F1_c + epsilon), so classes the federation gets wrong count more.

Without a server test set (paper section 3.3), the server pools a small share of every site's
training rows, or each site model is scored on the other sites' hold-outs. The second option
uses hold-out rows for weighting, as the paper proposes; scores on those hold-outs are then no
longer untouched by training.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fedcore.algorithms.base import Algorithm, Records, param
from fedcore.algorithms.context import Need
from fedcore.records import SiteWeights
from fedcore.errors import SpecError
from fedcore.metrics import confusion_matrix, per_class_f1

WEIGHT_RULES = ("accuracy_x_size", "accuracy", "threshold", "power")


@dataclass
class AdaFedParams:
    weight_rule: str = param(
        "accuracy",
        "Site weight p_i from its accuracy on the server test set: 'accuracy_x_size' "
        "(accuracy x training rows, Sim. 1.A), 'accuracy' (1.B, 1.C), 'threshold' "
        "(max(accuracy - floor, 0), 1.D), 'power' (accuracy ** power).",
        WEIGHT_RULES,
    )
    accuracy_floor: float = param(0.55, "threshold rule: accuracy a site must exceed to count.")
    power: float = param(2.0, "power rule: exponent (2 quadratic, 3 cubic) to suppress bad sites.")
    adaptive_loss: bool = param(True, "Adapt the class weights kappa_c = 1 / (F1_c + epsilon).")
    epsilon: float = param(0.1, "epsilon in kappa_c; keep it at least 0.01.")
    server_test: str = param(
        "pooled",
        "The server's test set: 'given' (the federation's own), 'pooled' (a share of each site's "
        "training rows copied to the server) or 'others' (each site's model scored on the other "
        "sites' hold-outs).",
        ("given", "pooled", "others"),
    )
    server_share: float = param(0.1, "pooled: share of each site's training rows sent to the server.")

    def __post_init__(self) -> None:
        if self.epsilon < 0.01:
            raise SpecError(f"AdaFed: epsilon must be at least 0.01, not {self.epsilon}.")
        if not 0 < self.server_share < 1:
            raise SpecError(f"AdaFed: server_share must be in (0, 1), not {self.server_share}.")

    def weight_formula(self) -> str:
        """How the rule turns a site's accuracy into p_i, as `AdaFed._weights` computes it."""
        return {"accuracy_x_size": "accuracy × training rows", "accuracy": "accuracy",
                "threshold": f"max(accuracy − {self.accuracy_floor:g}, 0)",
                "power": f"accuracy^{self.power:g}"}[self.weight_rule]


class AdaFed(Algorithm):
    name = "adafed"
    title = "AdaFed"
    summary = "Server weights each site's model by its test performance and adapts class weights."
    Params = AdaFedParams
    Record = SiteWeights
    needs_hint = ("Set its server_test to 'given' and give the server's data as server_data (pooling a share of "
                  "every site's rows, or sending every model to every site, is not done in a real federation).")

    def needs(self) -> frozenset[Need]:
        return frozenset({{"given": Need.SERVER_TEST, "pooled": Need.POOLED_ROWS,
                           "others": Need.HOLDOUTS_AT_SERVER}[self.params.server_test]})

    def setup(self, ctx) -> None:
        n_classes = ctx.federation.n_classes
        self.kappa = torch.ones(n_classes)
        self.server_set = self._server_set(ctx)
        self.p = torch.ones(len(ctx.models))
        self.share = self.p / self.p.sum()
        self.site_accuracy = torch.zeros(len(ctx.models))
        self.server_f1 = torch.zeros(n_classes)
        self.server_accuracy = float("nan")
        self.fallback_uniform = False

    def _server_set(self, ctx) -> tuple[torch.Tensor, torch.Tensor] | None:
        mode = self.params.server_test
        if mode == "given":
            if ctx.federation.server_test is None:
                raise SpecError(
                    "AdaFed: this federation has no server test set (give one as the data's server_test=FILE.csv "
                    "for CSV sites; npz and idx data bring their test split); or use server_test 'pooled' or 'others'."
                )
            return tuple(t.to(ctx.device) for t in ctx.federation.server_test)
        if mode == "others":
            return None
        return ctx.server_share(self.params.server_share, "adafed-server")

    def class_weights(self, ctx) -> torch.Tensor:
        # Only relative kappa matter; scaled to sum to K like the sites' own weights would.
        weight = self.kappa * len(self.kappa) / self.kappa.sum()
        return weight.expand(len(ctx.models), -1)

    def _accuracies(self, ctx, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Accuracy of every site's returned model on the same rows."""
        return (ctx.predict_each(x).argmax(-1) == y).double().mean(-1).cpu()

    def mixing(self, ctx) -> torch.Tensor:
        n_sites = len(ctx.models)
        if self.server_set is not None:
            self.site_accuracy = self._accuracies(ctx, *self.server_set)
        else:  # every model on every other site's hold-out, averaged
            scores = torch.stack([self._accuracies(ctx, x, y) for x, y in ctx.test_sets])  # [holdout, model]
            others = 1 - torch.eye(n_sites, dtype=scores.dtype) if n_sites > 1 else torch.ones(1, 1)
            self.site_accuracy = (scores * others).sum(0) / others.sum(0)
        self.p = self._weights(ctx)
        # When no site scores above zero (e.g. all below the floor), average uniformly this round.
        self.fallback_uniform = bool(self.p.sum() <= 0)
        uniform = torch.full((n_sites,), 1.0 / n_sites)
        self.share = uniform if self.fallback_uniform else self.p / self.p.sum()
        return self.share.expand(n_sites, n_sites).clone()

    def _weights(self, ctx) -> torch.Tensor:
        accuracy, rule = self.site_accuracy.clone(), self.params.weight_rule
        if rule == "accuracy_x_size":
            return accuracy * torch.tensor([float(n) for n in ctx.train_sizes])
        if rule == "threshold":
            return (accuracy - self.params.accuracy_floor).clamp(min=0)
        if rule == "power":
            return accuracy**self.params.power
        return accuracy

    @torch.no_grad()
    def after_aggregation(self, ctx) -> None:
        server_model = ctx.models[0]  # every site now holds the server model
        sets = [self.server_set] if self.server_set is not None else ctx.test_sets
        y = torch.cat([y for _, y in sets]).cpu()
        predicted = torch.cat([ctx.predict(server_model, x).argmax(1) for x, _ in sets]).cpu()
        confusion = confusion_matrix(y, predicted, len(self.kappa))
        self.server_f1 = per_class_f1(confusion).float()
        self.server_accuracy = float(confusion.diagonal().sum() / confusion.sum())
        if self.params.adaptive_loss:
            self.kappa = 1.0 / (self.server_f1 + self.params.epsilon)

    def record(self, ctx) -> Records:
        share = self.share
        by_site = lambda t: dict(zip(ctx.site_names, t.tolist()))  # noqa: E731
        record = SiteWeights(
            p=by_site(self.p),
            p_share=by_site(share),
            site_accuracy=by_site(self.site_accuracy),
            kappa=self.kappa.tolist(),
            server_f1_per_class=self.server_f1.tolist(),
            server_macro_f1=float(self.server_f1.mean()),
            server_accuracy=self.server_accuracy,
            fallback_uniform=self.fallback_uniform,
            weight_formula=self.params.weight_formula(),
        )
        arrays = {
            "p": self.p.numpy(),
            "p_share": share.numpy(),
            "kappa": self.kappa.numpy(),
            "server_f1": self.server_f1.numpy(),
        }
        return record, arrays
