"""A few steps of a tiny regression: enough to see the GPU (or CPU) work inside the image."""

import torch


def main() -> None:
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(0)
    x = torch.randn(1024, 16, device=device)
    w_true = torch.randn(16, 1, device=device)
    y = x @ w_true
    model = torch.nn.Linear(16, 1).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(50):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"device={device} torch={torch.__version__} final_loss={loss.item():.4f}")


if __name__ == "__main__":
    main()
