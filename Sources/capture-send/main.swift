print("capture-send")
