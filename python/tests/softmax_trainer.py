"""A NumPy-only trainer: softmax regression through tern's NumPyTrainer API (no torch)."""
import numpy as np

import tern


class SoftmaxTrainer(tern.NumPyTrainer):
    def __init__(self, x, y, classes, x_eval=None, y_eval=None, l2=0.0):
        self.x, self.y, self.classes, self.l2 = x.astype(np.float32), y, classes, l2
        self.x_eval, self.y_eval = x_eval, y_eval
        self.w = np.zeros((x.shape[1], classes), np.float32)
        self.b = np.zeros(classes, np.float32)

    def get_parameters(self):
        return [self.w, self.b]

    def tensor_names(self):
        return ["weight", "bias"]

    def train_rows(self):
        return len(self.y)

    def eval_rows(self):
        return 0 if self.y_eval is None else len(self.y_eval)

    def label_histogram(self):
        labels, counts = np.unique(self.y, return_counts=True)
        return dict(zip(labels.tolist(), counts.tolist()))

    def loss_grad(self, w, b, x, y):
        z = x @ w + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        loss = -np.log(p[np.arange(len(y)), y] + 1e-12).mean()
        p[np.arange(len(y)), y] -= 1.0
        p /= len(y)
        return loss, x.T @ p + self.l2 * w, p.sum(axis=0), z

    def fit(self, parameters, config):
        w, b = (a.copy() for a in parameters)
        rng = np.random.default_rng([config["seed"], config["round"]])
        steps, losses = max(1, config["local_steps"]), []
        for _ in range(steps):
            rows = rng.choice(len(self.y), size=min(config["batch_size"], len(self.y)),
                              replace=False)
            loss, gw, gb, _ = self.loss_grad(w, b, self.x[rows], self.y[rows])
            losses.append(loss)
            if steps == 1:
                return tern.Gradient([gw, gb]), len(rows), {"loss": loss}
            w -= config["local_lr"] * gw
            b -= config["local_lr"] * gb
        delta = [parameters[0] - w, parameters[1] - b]
        return tern.Delta(delta), steps * len(rows), {"loss": float(np.mean(losses))}

    def evaluate(self, parameters, config):
        loss, _, _, z = self.loss_grad(*parameters, self.x_eval, self.y_eval)
        return loss, len(self.y_eval), {"accuracy": float((z.argmax(1) == self.y_eval).mean())}
