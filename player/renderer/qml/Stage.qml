// The screen: one Qt Quick scene on black. Everything drawn is a layer in `content`, which is
// turned as configured; Python (kiosk.py) decides which layer is in front (z) and fades it in.
import QtQuick

Rectangle {
    id: stage

    // Clockwise rotation of the content on the panel: 0, 90, 180 or 270.
    property int turn: 0
    readonly property bool sideways: turn === 90 || turn === 270

    // Components by file name, compiled once.
    property var components: ({})

    color: "black"

    // A new layer from <name>.qml in the content, under the curtain. Made here, not
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

        // Layers on their way to the screen load under this (z -1); layers in front are
        // raised above it (z 1 and up). Nothing shows before it is raised.
        Rectangle {
            anchors.fill: parent
            color: "black"
            z: 0
        }
    }
}
