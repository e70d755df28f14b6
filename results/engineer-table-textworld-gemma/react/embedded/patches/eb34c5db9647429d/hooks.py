# code
