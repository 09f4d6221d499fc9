"""``sklearn.linear_model.LogisticRegression``: multinomial logistic regression with sklearn's
default L2 penalty (C=1.0: the loss is the summed cross-entropy plus ||W||^2 / (2C), the
intercept unpenalised), fitted with torch's L-BFGS."""

import numpy as np
import torch


class LogisticRegression:
    """``fit(X, y)`` then ``predict(X)``, as sklearn's (``multi_class`` accepted, always
    multinomial)."""

    def __init__(self, multi_class: str = "multinomial", max_iter: int = 100,
                 C: float = 1.0) -> None:  # noqa: N803 (sklearn's name)
        self.max_iter, self.C = max_iter, C

    def fit(self, X, y) -> "LogisticRegression":  # noqa: N803
        x = torch.as_tensor(np.asarray(X, np.float64))
        self.classes_, codes = np.unique(np.asarray(y), return_inverse=True)
        t = torch.as_tensor(codes)
        w = torch.zeros(x.shape[1], len(self.classes_), dtype=torch.float64, requires_grad=True)
        b = torch.zeros(len(self.classes_), dtype=torch.float64, requires_grad=True)
        opt = torch.optim.LBFGS([w, b], max_iter=self.max_iter, line_search_fn="strong_wolfe")

        def closure():
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(x @ w + b, t, reduction="sum")
            loss = loss + (w * w).sum() / (2 * self.C)
            loss.backward()
            return loss

        opt.step(closure)
        self.coef_, self.intercept_ = w.detach().T.numpy(), b.detach().numpy()
        return self

    def predict(self, X) -> np.ndarray:  # noqa: N803
        scores = np.asarray(X, np.float64) @ self.coef_.T + self.intercept_
        return self.classes_[scores.argmax(1)]
