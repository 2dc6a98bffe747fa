print("capture-recv")
