module asynctraced/gotests

go 1.19
