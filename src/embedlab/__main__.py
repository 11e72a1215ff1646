from embedlab._console import run

if __name__ == "__main__":
    run()
