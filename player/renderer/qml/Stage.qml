// The screen: one Qt Quick scene (the window clears it to black). Everything drawn is a layer
// in `content`, which is turned as configured; Python (kiosk.py) decides which layer is in
// front (z) and fades it in.
import QtQuick

Item {
    id: stage

    // Clockwise rotation of the content on the panel: 0, 90, 180 or 270.
    property int turn: 0
    readonly property bool sideways: turn === 90 || turn === 270

    // Components by file name, compiled once.
    property var components: ({})

    // A new layer from <name>.qml in the content. Made here, not
    // by Python, so that Qt alone owns it: it ends with destroy() or with the scene.
    function make(name, properties) {
        if (!(name in components)) {
            components[name] = Qt.createComponent(name + ".qml")
            if (components[name].status === Component.Error)
                console.error(components[name].errorString())
        }
        return components[name].createObject(content, properties)
    }
    // Destroy a layer made above (deferred by QML: it may be handling one of its signals).
    function unmake(item) { item.destroy() }

    Item {
        id: content
        objectName: "content"
        anchors.centerIn: parent
        width: stage.sideways ? stage.height : stage.width
        height: stage.sideways ? stage.width : stage.height
        rotation: stage.turn
    }
}
